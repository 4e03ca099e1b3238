"""Configuration: defaults, a TOML file, environment variables, validation and ``config show``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger import InvalidInput, connect
from effectledger.app.config import SETTINGS, load_config

FILE = """
[ledger]
recover_after_s = 10
review_owner = "payments-oncall"

[worker]
batch = 20
dispatch_threads = 3
"""


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    """A configuration file setting four values."""
    path = tmp_path / "effectledger.toml"
    path.write_text(FILE, "utf-8")
    return path


def test_every_setting_has_its_default_without_file_or_variables() -> None:
    """With nothing set, each value is its documented default and says so."""
    config = load_config(environ={})
    for setting in SETTINGS:
        assert config[setting.key] == setting.default
        assert config.sources[setting.key] == "default"
    assert config.ledger_settings().recover_after == timedelta(seconds=30)


def test_a_variable_wins_over_the_file_and_the_file_over_the_default(toml: Path) -> None:
    """The file sets its keys, a variable overrides one of them, each value names its source."""
    environ = {"EFFECTLEDGER_CONFIG": str(toml), "EFFECTLEDGER_WORKER_BATCH": "7"}
    config = load_config(environ=environ)
    assert (config["recover_after_s"], config["batch"], config["dispatch_threads"]) == (10, 7, 3)
    assert config.sources["recover_after_s"] == f"{toml} [ledger]"
    assert config.sources["batch"] == "$EFFECTLEDGER_WORKER_BATCH"
    assert config.sources["lookup_interval_s"] == "default"
    settings = config.ledger_settings()
    assert (settings.recover_after, settings.review_owner) == (
        timedelta(seconds=10),
        "payments-oncall",
    )


@pytest.mark.parametrize(
    ("environ", "text", "field"),
    [
        ({"EFFECTLEDGER_RECOVER_AFTER_S": "abc"}, None, "recover_after_s"),
        ({"EFFECTLEDGER_LOOKUP_INTERVAL_S": "-5"}, None, "lookup_interval_s"),
        ({"EFFECTLEDGER_WORKER_DISPATCH_THREADS": "1.5"}, None, "dispatch_threads"),
        ({"EFFECTLEDGER_MAX_INCONCLUSIVE_LOOKUPS": "0"}, None, "max_inconclusive_lookups"),
        ({}, "[ledger]\nrecover_afer_s = 3\n", "recover_afer_s"),
        ({}, "[ledger]\nlog_key = 'in a file'\n", "log_key"),
        ({}, "recover_after_s = 3\n", "config"),
        ({}, "[ledger\n", "config"),
        ({}, "[worker]\nbatch = true\n", "batch"),
        ({"EFFECTLEDGER_WORKER_SEAL_WITNESSES": "http://127.0.0.1:1"}, None, "seal_witnesses"),
        ({}, "[worker]\nseal_witnesses = 'ftp://w=key'\n", "seal_witnesses"),
        ({}, "[worker]\nseal_witnesses = [1]\n", "seal_witnesses"),
    ],
)
def test_a_bad_value_is_refused_naming_the_setting_and_its_source(
    tmp_path: Path, environ: dict[str, str], text: str | None, field: str
) -> None:
    """A value that does not parse, an unknown key, a key outside a table or broken TOML is
    invalid_input naming the setting, before anything runs."""
    if text is not None:
        (tmp_path / "c.toml").write_text(text, "utf-8")
        environ = {**environ, "EFFECTLEDGER_CONFIG": str(tmp_path / "c.toml")}
    with pytest.raises(InvalidInput) as raised:
        load_config(environ=environ)
    assert raised.value.details["field"] == field


def test_seal_witnesses_come_from_a_toml_list_or_a_spaced_variable(tmp_path: Path) -> None:
    """Witnesses are a TOML list of URL=KEY strings, or the variable's space-separated text."""
    from effectledger.audit.witnessing.cosign import Cosigner

    keys = [Cosigner(f"w.example/{n}", bytes(32 * [n])).verifier().key_string() for n in (1, 2)]
    entries = [f"http://127.0.0.1:{9000 + n}={key}" for n, key in enumerate(keys)]
    path = tmp_path / "c.toml"
    path.write_text(f"[worker]\nseal_witnesses = {json.dumps(entries)}\n", "utf-8")
    assert load_config(path, environ={})["seal_witnesses"] == tuple(entries)
    spaced = {"EFFECTLEDGER_WORKER_SEAL_WITNESSES": " ".join(reversed(entries))}
    assert load_config(path, environ=spaced)["seal_witnesses"] == tuple(reversed(entries))
    assert load_config(environ={})["seal_witnesses"] == ()


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    """A configuration file that does not exist is an error, not an empty configuration."""
    with pytest.raises(InvalidInput, match="no configuration file"):
        load_config(tmp_path / "absent.toml", environ={})


def test_connect_takes_its_timing_and_store_from_the_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect() without settings uses the configured recovery delay and store URL."""
    monkeypatch.setenv("EFFECTLEDGER_RECOVER_AFTER_S", "3")
    monkeypatch.setenv("EFFECTLEDGER_DB", f"sqlite:///{tmp_path / 'configured.db'}")
    with connect() as ledger:
        assert ledger.ledger.settings.recover_after == timedelta(seconds=3)
    assert (tmp_path / "configured.db").exists()
    monkeypatch.setenv("EFFECTLEDGER_REVIEW_DEADLINE_S", "soon")
    with pytest.raises(InvalidInput, match="review_deadline_s"):
        connect(f"sqlite:///{tmp_path / 'never.db'}")
    assert not (tmp_path / "never.db").exists()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "effectledger.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_config_show_prints_each_value_and_its_source_never_a_secret(toml: Path) -> None:
    """``config show --json`` lists every setting with its source; the log key shows as set."""
    secret = "never-print-this-key"
    done = _cli("config", "show", "--config", str(toml), "--json",
                env={"EFFECTLEDGER_LOG_KEY": secret, "EFFECTLEDGER_WORKER_BATCH": "9"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row["setting"]: row for row in json.loads(done.stdout)["settings"]}
    assert rows.keys() == {setting.key for setting in SETTINGS}
    assert (rows["batch"]["value"], rows["batch"]["source"]) == (9, "$EFFECTLEDGER_WORKER_BATCH")
    assert rows["recover_after_s"]["source"] == f"{toml} [ledger]"
    assert rows["log_key"]["value"] == "(set)"
    assert secret not in done.stdout + done.stderr
    text = _cli("config", "show", "--config", str(toml), env={})
    assert "ledger.review_owner" in text.stdout
    assert "payments-oncall" in text.stdout


@pytest.mark.slow
def test_a_worker_refuses_to_start_on_a_bad_setting(tmp_path: Path) -> None:
    """``worker`` with a malformed configured batch exits 1 with one line, doing nothing."""
    done = _cli("worker", "--db", f"sqlite:///{tmp_path / 'l.db'}", "--app",
                "tests.worker.apps:refunds", "--once",
                env={"EFFECTLEDGER_WORKER_BATCH": "lots",
                     "EFFECTLEDGER_TEST_RECEIVER": str(tmp_path / "r.db")})  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error [invalid_input]: batch from $EFFECTLEDGER_WORKER_BATCH must be a whole number "
        "from 1 to 10000, not 'lots'"
    )
    assert "worker pass" not in done.stdout


def test_config_show_masks_the_password_of_the_store_url_in_text_and_json(toml: Path) -> None:
    """The store URL's password, in its user part or its query, is shown as ``***`` only."""
    url = "postgresql://app:hunter2secret@db.example:5432/ledger?password=alsosecret"
    env = {"EFFECTLEDGER_DB": url}
    shown = _cli("config", "show", "--config", str(toml), "--json", env=env)
    text = _cli("config", "show", "--config", str(toml), env=env)
    assert shown.returncode == text.returncode == 0, shown.stderr + text.stderr
    rows = {row["setting"]: row for row in json.loads(shown.stdout)["settings"]}
    assert rows["db"]["value"] == "postgresql://app:***@db.example:5432/ledger?password=***"
    assert "postgresql://app:***@db.example:5432/ledger?password=***" in text.stdout
    for output in (shown.stdout + shown.stderr, text.stdout + text.stderr):
        assert "hunter2secret" not in output
        assert "alsosecret" not in output


def test_an_unknown_store_scheme_is_refused_without_echoing_its_password(toml: Path) -> None:
    """``config show`` with a ``mysql://`` store URL exits 1 naming the setting, password hidden."""
    done = _cli(
        "config", "show", "--config", str(toml), env={"EFFECTLEDGER_DB": "mysql://u:pw9x@h/x"}
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error [invalid_input]: db from $EFFECTLEDGER_DB must be a store URL: sqlite:///path.db "
        "or postgresql://..., not 'mysql://u:***@h/x'"
    )
    assert "pw9x" not in done.stdout + done.stderr
    with pytest.raises(InvalidInput) as refused:
        load_config(None, environ={"EFFECTLEDGER_DB": "redis://127.0.0.1:6379/0"})
    assert refused.value.details["field"] == "db"
