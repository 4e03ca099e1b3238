"""Each framework adapter without its framework raises missing_extra naming the pip command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from effectledger import EffectLedger
from effectledger.errors import MissingExtra
from effectledger.extras import EXTRAS
from tests.callers.scenarios import fresh_world


def _maf(app: EffectLedger) -> object:
    from effectledger.callers.frameworks.maf import ledger_tool

    return ledger_tool(app, "refund_order")


def _openai_agents(app: EffectLedger) -> object:
    from effectledger.callers.frameworks.openai_agents import ledger_tool

    return ledger_tool(app, "refund_order")


def _langgraph(app: EffectLedger) -> object:
    from effectledger.callers.frameworks.langgraph import ledger_middleware

    return ledger_middleware(app, "refund_order")


def _pydantic_ai(app: EffectLedger) -> object:
    from effectledger.callers.frameworks.pydantic_ai import ledger_tool

    return ledger_tool(app, "refund_order")


def _adk(app: EffectLedger) -> object:
    from effectledger.callers.frameworks.adk import ledger_tool

    return ledger_tool(app, "refund_order")


@pytest.mark.parametrize(
    ("extra", "build"),
    [
        ("maf", _maf),
        ("openai-agents", _openai_agents),
        ("langgraph", _langgraph),
        ("pydantic-ai", _pydantic_ai),
        ("adk", _adk),
    ],
)
def test_missing_framework_names_its_extra(
    extra: str,
    build: Callable[[EffectLedger], object],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Building the adapter without its package raises missing_extra with the pip line."""
    with fresh_world(f"sqlite:///{tmp_path / 'ledger.db'}", tmp_path) as world:
        assert build(world.app) is not None  # installed here: it builds
        monkeypatch.setitem(EXTRAS, extra, ("effectledger_no_such_framework",))
        with pytest.raises(MissingExtra) as caught:
            build(world.app)
    assert caught.value.details["extra"] == extra
    assert f"pip install 'effectledger[{extra}]'" in caught.value.message
