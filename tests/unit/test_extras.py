"""A feature whose optional extra is missing says which extra to install, with a stable code."""

from __future__ import annotations

import pytest

from effectledger.errors import MissingExtra
from effectledger.extras import EXTRAS, require_extra
from effectledger.store import open_store


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a PostgreSQL URL without the postgres extra raises missing_extra (501)."""
    monkeypatch.setitem(EXTRAS, "postgres", ("effectledger_no_such_package",))
    with pytest.raises(MissingExtra) as caught:
        open_store("postgresql://nobody@127.0.0.1:1/none")
    error = caught.value
    assert error.code == "missing_extra"
    assert error.status == 501
    assert error.details == {"extra": "postgres", "missing": "effectledger_no_such_package"}
    assert "pip install 'effectledger[postgres]'" in error.message


def test_installed_extras_pass() -> None:
    """Every extra the test environment installs is found."""
    for extra in EXTRAS:
        require_extra(extra, extra)


def test_extras_match_the_package_metadata() -> None:
    """Every extra named here is declared by the package (and so installable)."""
    from importlib.metadata import metadata

    declared = set(metadata("effectledger").get_all("Provides-Extra") or [])
    assert set(EXTRAS) <= declared
