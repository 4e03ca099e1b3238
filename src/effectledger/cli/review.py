"""``proposals``, ``approve`` and ``deny``: the reviewer's queue and decisions on the command line.

Each runs one method of the application's :class:`~effectledger.app.EffectLedger` (built by
``--app MODULE:FACTORY``, as for ``serve``) as the reviewer an API key names: the key is read
from ``$EFFECTLEDGER_API_KEY`` (never from an argument, which other users of the machine can
see), and the same access rule as the HTTP API applies. A decision names the digest the
reviewer was shown; ``proposals`` prints it in full beside each id.

- ``proposals [--action A] [--pool P] [--proposer X] [--order expiring|newest] [--limit N]
  [--after CURSOR]`` lists what waits for the reviewer, why, and when it expires.
- ``approve PROPOSAL_ID --digest D [--expires-in MINUTES]`` approves exactly that digest.
- ``deny PROPOSAL_ID --digest D --reason TEXT`` denies it (final).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from effectledger.app import EffectLedger
from effectledger.app.keys import ApiKeys
from effectledger.cli.application import load_ledger
from effectledger.cli.options import Commands, add_db, add_json
from effectledger.cli.output import Output
from effectledger.display import hidden_in, json_to_reveal
from effectledger.errors import InvalidInput, NotAuthenticated
from effectledger.model import Context

__all__ = ["KEY_VARIABLE", "register"]

KEY_VARIABLE = "EFFECTLEDGER_API_KEY"


def _common(parser: argparse.ArgumentParser) -> None:
    add_db(parser)
    parser.add_argument(
        "--app",
        required=True,
        metavar="MODULE:FACTORY",
        help="a callable that takes the store URL and returns the EffectLedger (as for serve)",
    )
    add_json(parser)


def register(commands: Commands) -> None:
    """Add ``proposals``, ``approve`` and ``deny``."""
    listed = commands.add_parser(
        "proposals",
        help="list the proposals waiting for your decision",
        description="List the proposals that wait for the decision of the reviewer whose API "
        f"key is in ${KEY_VARIABLE}: why each waits (policy, approvals still needed), when it "
        "expires, and the digest to approve.",
    )
    _common(listed)
    listed.add_argument("--action", help="only proposals of this action")
    listed.add_argument("--pool", help="only proposals drawing on this pool")
    listed.add_argument("--proposer", help="only proposals by this actor")
    listed.add_argument(
        "--order",
        choices=("expiring", "newest"),
        default="expiring",
        help="soonest-expiring first (default) or newest first",
    )
    listed.add_argument("--limit", type=int, default=50, help="entries (default 50)")
    listed.add_argument("--after", help="the cursor printed after the previous page")
    listed.set_defaults(handler=_proposals)

    approve = commands.add_parser(
        "approve",
        help="approve a proposal exactly as shown (its digest)",
        description=f"Approve a proposal as the reviewer whose API key is in ${KEY_VARIABLE}. "
        "The digest must be the one you were shown: if the proposal changed, the approval is "
        "refused (digest_mismatch).",
    )
    _common(approve)
    approve.add_argument("proposal_id", help="the proposal to approve")
    approve.add_argument("--digest", required=True, help="the digest you were shown")
    approve.add_argument(
        "--expires-in",
        type=int,
        default=60,
        metavar="MINUTES",
        help="how long the approval stays usable (default 60)",
    )
    approve.set_defaults(handler=_approve)

    deny = commands.add_parser(
        "deny",
        help="deny a proposal (final)",
        description=f"Deny a proposal as the reviewer whose API key is in ${KEY_VARIABLE}; "
        "a denial closes it for good.",
    )
    _common(deny)
    deny.add_argument("proposal_id", help="the proposal to deny")
    deny.add_argument("--digest", required=True, help="the digest you were shown")
    deny.add_argument("--reason", required=True, help="why, for the audit trail")
    deny.set_defaults(handler=_deny)


@contextmanager
def _reviewer(args: argparse.Namespace) -> Iterator[tuple[EffectLedger, Context]]:
    token = os.environ.get(KEY_VARIABLE)
    if not token:
        raise NotAuthenticated(
            f"set {KEY_VARIABLE} to your API key (effectledger keys create)",
            reason="missing_credentials",
        )
    ledger = load_ledger(args.app, args.db)
    if not isinstance(ledger, EffectLedger):
        raise InvalidInput(f"{args.app} did not return an EffectLedger", field="app")
    try:
        yield ledger, ApiKeys(ledger.store).authenticate(token)
    finally:
        ledger.close()


def _proposals(args: argparse.Namespace, out: Output) -> int:
    with _reviewer(args) as (ledger, reviewer):
        page = ledger.pending(
            reviewer,
            action=args.action,
            pool=args.pool,
            proposer=args.proposer,
            order=args.order,
            limit=args.limit,
            after=args.after,
        )
    if out.json_mode:
        out.json(page.to_dict())
        return 0
    if not page.entries:
        out.line(f"nothing waits for {reviewer.actor_id}'s decision in {reviewer.tenant_id}")
    for entry in page.entries:
        proposal = entry.proposal
        out.line(f"{proposal.proposal_id}  {proposal.action}  {proposal.target}")
        out.line(f"  proposer {proposal.proposer_id}; {proposal.units} units of {proposal.pool}")
        # Output.line reveals it once: each hidden character shows as \u27e8U+XXXX\u27e9.
        out.line(f"  arguments {json_to_reveal(proposal.arguments)}")
        if proposal.stated_reason is not None:  # the agent's words, unchecked
            out.line(f"  the agent says: {proposal.stated_reason}")
        hidden = hidden_in([proposal.target, proposal.arguments, proposal.stated_reason or ""])
        if hidden:
            out.line(f"  warning: holds hidden characters ({', '.join(hidden)}), shown as marks")
        out.line(f"  {entry.waits_for}")
        out.line(f"  {entry.to_dict(page.read_at)['expires']}")
        out.line(f"  digest {proposal.digest}")
    if page.next_cursor is not None:
        out.line(f"more: --after {page.next_cursor}")
    return 0


def _approve(args: argparse.Namespace, out: Output) -> int:
    with _reviewer(args) as (ledger, reviewer):
        approval = ledger.approve(
            reviewer,
            args.proposal_id,
            digest=args.digest,
            expires_in=timedelta(minutes=args.expires_in),
        )
    if out.json_mode:
        out.json({"approval_id": approval.approval_id, "digest": approval.digest})
    else:
        out.line(f"approved {approval.proposal_id} as {approval.approver_id}")
        out.line(f"approval {approval.approval_id}, usable until {approval.expires_at.isoformat()}")
    return 0


def _deny(args: argparse.Namespace, out: Output) -> int:
    with _reviewer(args) as (ledger, reviewer):
        denial = ledger.deny(reviewer, args.proposal_id, digest=args.digest, reason=args.reason)
    if out.json_mode:
        out.json({"approval_id": denial.approval_id, "digest": denial.digest})
    else:
        out.line(f"denied {denial.proposal_id} as {denial.approver_id}: {denial.reason}")
    return 0
