"""Where a ledger's keys live (:func:`effectledger.keyfiles.key_directory_for`), how they load."""

from __future__ import annotations

from pathlib import Path

import pytest

from effectledger import InvalidInput
from effectledger.app import protection
from effectledger.app.protection import LedgerKeys, create_keys, load_keys
from effectledger.audit.keys.files import KEY_ENV
from effectledger.errors import TrailKeyInvalid
from effectledger.keyfiles import key_directory_for


def test_an_sqlite_ledger_keeps_its_keys_beside_its_file() -> None:
    """``sqlite:///data/ledger.db`` keeps its keys in ``data/ledger.db.keys``; options do not
    change the place, and a configured directory wins."""
    assert key_directory_for("sqlite:///data/ledger.db") == Path("data/ledger.db.keys")
    assert key_directory_for("sqlite:////srv/l.db?group_commit=on") == Path("/srv/l.db.keys")
    assert key_directory_for("sqlite:///l.db", "/etc/keys") == Path("/etc/keys")


def test_a_postgres_ledger_needs_a_configured_key_directory() -> None:
    """A PostgreSQL URL without a configured directory is ``invalid_input`` on ``key_dir``,
    saying how to set one; with one it is that directory."""
    with pytest.raises(InvalidInput, match="EFFECTLEDGER_KEY_DIR") as refused:
        key_directory_for("postgresql://ledger@db:5432/ledger")
    assert refused.value.details["field"] == "key_dir"
    assert key_directory_for("postgresql://db/ledger", "/keys") == Path("/keys")


def test_the_log_key_variable_is_the_one_the_sealer_reads() -> None:
    """Opening a ledger names ``$EFFECTLEDGER_LOG_KEY`` without loading the evidence modules:
    the name is the sealer's."""
    assert protection._LOG_KEY_ENV == KEY_ENV


def test_a_key_directory_missing_its_keys_protects_nothing(tmp_path: Path) -> None:
    """An empty key directory holds no key: both are reported exposed."""
    (tmp_path / "keys").mkdir()
    keys = load_keys(tmp_path / "keys")
    assert (keys.trail_keys, keys.has_log_key) == (None, False)
    assert len(keys.exposed) == 2
    assert LedgerKeys(None, log_key_env=True).exposed == (protection.TRAIL_EXPOSED,)


def test_a_trail_key_file_others_may_read_is_refused(tmp_path: Path) -> None:
    """A key directory whose trail key file was made readable by others is refused, not used."""
    made = create_keys(tmp_path / "keys")
    assert made.directory is not None
    (made.directory / "trail.keys").chmod(0o644)
    with pytest.raises(TrailKeyInvalid, match="chmod 600"):
        load_keys(made.directory)
