"""What trusted code declares about an action: its registry entry, its policy, its functions.

- :mod:`~effectledger.actions.registry`: :class:`Action` and the :class:`ActionRegistry`;
- :mod:`~effectledger.actions.functions`: :class:`ActionHandle`, what
  :meth:`effectledger.EffectLedger.action` returns, and the declaration it is built from;
- :mod:`~effectledger.actions.policy`: tiers, decisions, pre-authorization, :class:`RulePolicy`;
- :mod:`~effectledger.actions.presentation`: :class:`Display`, how an action's arguments read to
  a reviewer (a summary, money fields);
- :mod:`~effectledger.actions.cedar`: a policy written in Cedar (extra ``cedar``).
"""

from effectledger.actions.functions import ActionHandle, Declaration
from effectledger.actions.policy import (
    Decision,
    Policy,
    Preauthorization,
    RulePolicy,
    Tier,
)
from effectledger.actions.presentation import Display
from effectledger.actions.registry import Action, ActionRegistry

__all__ = [
    "Action",
    "ActionHandle",
    "ActionRegistry",
    "Decision",
    "Declaration",
    "Display",
    "Policy",
    "Preauthorization",
    "RulePolicy",
    "Tier",
]
