"""A :class:`~effectledger.actions.policy.Policy` whose rules live in Cedar, outside the code.

Install with ``pip install 'effectledger[cedar]'``. Each question is one Cedar request:

* principal ``User::"<actor id>"``, a member of ``Role::"<role>"`` for each trusted role;
* resource ``Target::"<target>"`` (the resource the proposal acts on);
* action ``Action::"request"`` (may the requester have this effect at all),
  ``Action::"read_only"`` (needs no approval), ``Action::"preauthorize"`` (a standing bounded
  decision covers it), or ``Action::"approve"`` (may this principal approve it);
* context ``{action, contract_version, units, pool, account, endpoint, tenant, proposer, now}``
  (``now`` in Unix seconds), all from the stored proposal and the trusted context.

Self-approval is refused unless ``allow_self_approval`` is set, whatever the Cedar rules say.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from effectledger.actions.policy import Decision, Tier
from effectledger.errors import InvalidInput
from effectledger.extras import require_extra
from effectledger.model.operations import Context

if TYPE_CHECKING:
    from effectledger.model.authority import Proposal

__all__ = ["CedarPolicy"]


def _cedar() -> Any:
    require_extra("cedar", "Cedar policies")
    import cedarpy

    return cedarpy


class CedarPolicy:
    """Tiers and approver rights decided by Cedar policy text (see the module docstring)."""

    def __init__(
        self,
        *,
        version: str,
        policies: str,
        budget: tuple[int, timedelta] | None = None,
        allow_self_approval: bool = False,
    ) -> None:
        cedar = _cedar()
        try:
            cedar.policies_to_json_str(policies)
        except Exception as exc:
            raise InvalidInput(f"the Cedar policies do not parse: {exc}") from None
        self._cedar = cedar
        self._version = version
        self._policies = policies
        self._budget = budget
        self._allow_self_approval = allow_self_approval

    @property
    def version(self) -> str:
        """The policy version recorded with decisions."""
        return self._version

    def _allowed(self, actor: Context, action: str, proposal: Proposal, now: datetime) -> bool:
        user = {"type": "User", "id": actor.actor_id}
        roles = [{"type": "Role", "id": role} for role in sorted(actor.roles)]
        entities = [
            {"uid": {"__entity": user}, "attrs": {}, "parents": [{"__entity": r} for r in roles]},
            *({"uid": {"__entity": r}, "attrs": {}, "parents": []} for r in roles),
        ]
        request = {
            "principal": f'User::"{_quote(actor.actor_id)}"',
            "action": f'Action::"{action}"',
            "resource": f'Target::"{_quote(proposal.target)}"',
            "context": {
                "action": proposal.action,
                "contract_version": proposal.contract_version,
                "units": proposal.units,
                "pool": proposal.pool,
                "account": proposal.destination.account_id,
                "endpoint": proposal.destination.endpoint,
                "tenant": proposal.tenant_id,
                "proposer": proposal.proposer_id,
                "now": int(now.timestamp()),
            },
        }
        return bool(self._cedar.is_authorized(request, self._policies, entities).allowed)

    def decide(self, requester: Context, proposal: Proposal, now: datetime) -> Decision:
        """``request`` must be permitted; then read-only, pre-authorized, or approval."""
        if not self._allowed(requester, "request", proposal, now):
            return Decision.deny(self._version, "cedar_denied")
        for action, tier in (("read_only", Tier.READ_ONLY), ("preauthorize", Tier.PREAUTHORIZED)):
            if self._allowed(requester, action, proposal, now):
                return Decision(allowed=True, tier=tier, policy_version=self._version)
        return Decision(allowed=True, tier=Tier.APPROVAL_REQUIRED, policy_version=self._version)

    def may_approve(self, approver: Context, proposal: Proposal) -> str | None:
        """Self-approval only if allowed; otherwise Cedar's ``approve`` decides."""
        if approver.actor_id == proposal.proposer_id and not self._allow_self_approval:
            return "self_approval"
        if not self._allowed(approver, "approve", proposal, proposal.created_at):
            return "not_an_approver"
        return None

    def budget(self) -> tuple[int, timedelta] | None:
        """The pre-authorization budget given at construction."""
        return self._budget


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
