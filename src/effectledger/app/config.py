"""Configuration in one place: defaults, a TOML file, then environment variables.

Every setting has a default, a key in the TOML file named by ``$EFFECTLEDGER_CONFIG`` (a table
per section, ``[ledger]``, ``[worker]`` and ``[desk]``) and an environment variable; a variable
wins over the file, the file over the default. :func:`load_config` validates everything at once and
raises :class:`~effectledger.errors.InvalidInput` naming the setting and where its bad value
came from, so a process refuses to start on a typo instead of running with a default.
:func:`~effectledger.app.connect` takes its :class:`~effectledger.ledger.LedgerSettings` from
here when none are passed; ``effectledger worker`` its loop settings; ``effectledger serve``
the desk's single sign-on; ``effectledger config show`` prints every value in force and its
source. Secrets (the log key, the SSO client secret) are read from the environment only and
shown as set or unset, never their value.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from effectledger.errors import InvalidInput
from effectledger.ledger import LedgerSettings
from effectledger.store import BACKENDS, redact
from effectledger.workers.settings import CLAIM_BATCH

__all__ = ["CONFIG_VARIABLE", "SETTINGS", "Config", "Setting", "load_config"]

CONFIG_VARIABLE = "EFFECTLEDGER_CONFIG"
"""The environment variable that names the TOML file."""


def _seconds(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("a number of seconds")
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError("a number of seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("a number of seconds greater than 0")
    return seconds


def _seconds_or_off(value: object) -> float | None:
    if value in (0, "0", 0.0, "off"):
        return None
    return _seconds(value)


def _count(low: int, high: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ValueError(f"a whole number from {low} to {high}")
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"a whole number from {low} to {high}") from None
        if not low <= number <= high:
            raise ValueError(f"a whole number from {low} to {high}")
        return number

    return parse


def _witnesses(value: object) -> tuple[str, ...]:
    """``URL=KEY`` witness entries: a TOML list of strings, or text separated by spaces."""
    from effectledger.audit.witnessing.submit import parse_witnesses

    if isinstance(value, str):
        entries = value.split()
    elif isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        entries = list(value)
    else:
        raise ValueError("URL=KEY witness entries (a list, or text separated by spaces)")
    try:
        parse_witnesses(entries)
    except InvalidInput as exc:
        raise ValueError(f"URL=KEY witness entries ({exc.message})") from None
    return tuple(entries)


def _text(value: object) -> str:
    if not isinstance(value, str) or not value or not value.isprintable():
        raise ValueError("printable text")
    return value


def _words(value: object) -> tuple[str, ...]:
    """Identifiers: a TOML list of strings, or text separated by spaces or commas."""
    from effectledger.model.operations import validate_identifier

    if isinstance(value, str):
        entries = value.replace(",", " ").split()
    elif isinstance(value, list) and all(isinstance(entry, str) for entry in value):
        entries = list(value)
    else:
        raise ValueError("a list of ids (or text separated by spaces)")
    try:
        return tuple(validate_identifier(entry, "id") for entry in entries)
    except InvalidInput:
        raise ValueError("ids of letters, digits and . _ : @ / -") from None


def _role_map(value: object) -> dict[str, str]:
    """Provider group -> ledger role: a TOML table, or ``group=role`` pairs separated by commas."""
    from effectledger.model.operations import validate_identifier

    if isinstance(value, str):
        pairs = [item.partition("=") for item in value.split(",") if item.strip()]
        if any(not sep for _, sep, _ in pairs):
            raise ValueError("group=role pairs separated by commas")
        found = {group.strip(): role.strip() for group, _, role in pairs}
    elif isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        found = dict(value)
    else:
        raise ValueError("a table of group = role (or group=role pairs separated by commas)")
    try:
        for role in found.values():
            validate_identifier(role, "role")
    except InvalidInput:
        raise ValueError("roles of letters, digits and . _ : @ / -") from None
    return found


def _store_url(value: object) -> str:
    """A store URL whose scheme names a backend this version has (``BACKENDS``)."""
    url = _text(value)
    if url.partition(":")[0].lower() not in BACKENDS:
        raise ValueError("a store URL: sqlite:///path.db or postgresql://...")
    return url


@dataclass(frozen=True, slots=True)
class Setting:
    """One setting: its section and key in the file, its variable, default and meaning."""

    section: str
    key: str
    variable: str
    default: Any
    parse: Callable[[object], Any]
    meaning: str
    secret: bool = False
    unset: str = "off"
    """What ``config show`` prints for a default of ``None``."""
    url: bool = False
    """A connection URL: shown with its password as ``***``."""


SETTINGS: tuple[Setting, ...] = (
    Setting("ledger", "db", "EFFECTLEDGER_DB", "sqlite:///effectledger.db", _store_url,
            "store URL: sqlite:///path.db or postgresql://...", url=True),
    Setting("ledger", "recover_after_s", "EFFECTLEDGER_RECOVER_AFTER_S", 30.0, _seconds,
            "how long after a claim recovery may look up an unanswered attempt"),
    Setting("ledger", "lookup_interval_s", "EFFECTLEDGER_LOOKUP_INTERVAL_S", 30.0, _seconds,
            "how far a reserved lookup pushes the attempt's next check"),
    Setting("ledger", "max_inconclusive_lookups", "EFFECTLEDGER_MAX_INCONCLUSIVE_LOOKUPS", 5,
            _count(1, 1000), "inconclusive lookups before MANUAL_REVIEW"),
    Setting("ledger", "review_owner", "EFFECTLEDGER_REVIEW_OWNER", "operations", _text,
            "who a manual review is assigned to (an actor or a role)"),
    Setting("ledger", "review_deadline_s", "EFFECTLEDGER_REVIEW_DEADLINE_S", 86400.0, _seconds,
            "escalation deadline: how long a manual review may take"),
    Setting("ledger", "record_budget_s", "EFFECTLEDGER_RECORD_BUDGET_S", 2.0, _seconds,
            "how long recording a destination's answer may take before it is left to recovery"),
    Setting("ledger", "key_dir", "EFFECTLEDGER_KEY_DIR", None, _text,
            "the key directory (trail key, log key), outside the database; default beside an "
            "SQLite file (ledger.db.keys), required for PostgreSQL",
            unset="beside an SQLite file (ledger.db.keys); none for PostgreSQL"),
    Setting("ledger", "log_key", "EFFECTLEDGER_LOG_KEY", None, _text,
            "the log signing key (environment only; never shown)", secret=True),
    Setting("worker", "dispatch_interval_s", "EFFECTLEDGER_WORKER_DISPATCH_INTERVAL_S", 1.0,
            _seconds, "seconds between idle dispatch passes"),
    Setting("worker", "dispatch_threads", "EFFECTLEDGER_WORKER_DISPATCH_THREADS", 1,
            _count(0, 256), "dispatch threads per worker (0: none)"),
    Setting("worker", "recovery_interval_s", "EFFECTLEDGER_WORKER_RECOVERY_INTERVAL_S", 5.0,
            _seconds, "seconds between idle recovery passes"),
    Setting("worker", "recovery_threads", "EFFECTLEDGER_WORKER_RECOVERY_THREADS", 1,
            _count(0, 256), "recovery threads per worker (0: none)"),
    Setting("worker", "seal_interval_s", "EFFECTLEDGER_WORKER_SEAL_INTERVAL_S", 30.0,
            _seconds_or_off, "seconds between sealing passes (0: no sealing)"),
    Setting("worker", "seal_witnesses", "EFFECTLEDGER_WORKER_SEAL_WITNESSES", (), _witnesses,
            "witnesses that cosign each checkpoint, URL=KEY each, separated by spaces"),
    Setting("worker", "sealer_memory", "EFFECTLEDGER_WORKER_SEALER_MEMORY", None, _text,
            "the file where the sealer keeps the last tree it signed per log, outside the "
            "database; default sealer-memory.json in the key directory",
            unset="sealer-memory.json in the key directory"),
    Setting("worker", "batch", "EFFECTLEDGER_WORKER_BATCH", 100, _count(1, 10_000),
            "operations one pass takes at most"),
    Setting("worker", "claim_batch", "EFFECTLEDGER_WORKER_CLAIM_BATCH", CLAIM_BATCH,
            _count(1, 10_000), "READY operations of one destination claimed in one "
            "transaction, sent together and recorded in one (1: each on its own)"),
    Setting("desk", "sso_issuer", "EFFECTLEDGER_SSO_ISSUER", None, _text,
            "the OpenID provider's issuer URL: the desk offers single sign-on through it",
            unset="off (API-key login only)"),
    Setting("desk", "sso_client_id", "EFFECTLEDGER_SSO_CLIENT_ID", None, _text,
            "the desk's client id at the OpenID provider"),
    Setting("desk", "sso_client_secret", "EFFECTLEDGER_SSO_CLIENT_SECRET", None, _text,
            "the desk's client secret (environment only; never shown)", secret=True),
    Setting("desk", "sso_tenants", "EFFECTLEDGER_SSO_TENANTS", (), _words,
            "the tenants this desk serves: a person's tenant claim must name one"),
    Setting("desk", "sso_tenant_claim", "EFFECTLEDGER_SSO_TENANT_CLAIM", "tenant", _text,
            "the ID token claim that names a person's tenant"),
    Setting("desk", "sso_roles_claim", "EFFECTLEDGER_SSO_ROLES_CLAIM", "roles", _text,
            "the ID token claim that lists a person's roles (approver, auditor, ...)"),
    Setting("desk", "sso_actor_claim", "EFFECTLEDGER_SSO_ACTOR_CLAIM", "sub", _text,
            "the ID token claim that names the person as the ledger's actor"),
    Setting("desk", "sso_scopes", "EFFECTLEDGER_SSO_SCOPES", ("openid",), _words,
            "scopes the desk asks for (openid is always asked)"),
    Setting("desk", "sso_role_map", "EFFECTLEDGER_SSO_ROLE_MAP", {}, _role_map,
            "the provider's group names to ledger roles (empty: the claim holds the roles)",
            unset="none"),
)  # fmt: skip
"""Every setting, in the order ``config show`` prints them."""


@dataclass(frozen=True, slots=True)
class Config:
    """The values in force, each with where it came from (``default``, the file, a variable)."""

    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def ledger_settings(self) -> LedgerSettings:
        """The ledger's timing and escalation rules."""
        return LedgerSettings(
            recover_after=timedelta(seconds=self["recover_after_s"]),
            lookup_interval=timedelta(seconds=self["lookup_interval_s"]),
            max_inconclusive_lookups=self["max_inconclusive_lookups"],
            review_owner=self["review_owner"],
            review_deadline=timedelta(seconds=self["review_deadline_s"]),
            record_budget=timedelta(seconds=self["record_budget_s"]),
        )


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except FileNotFoundError:
        raise InvalidInput(f"no configuration file {path}", field="config") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", field="config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"{path} is not valid TOML: {exc}", field="config") from exc
    known = {(s.section, s.key) for s in SETTINGS if not s.secret}
    found: dict[str, Any] = {}
    for section, table in document.items():
        if not isinstance(table, dict):
            raise InvalidInput(f"{path}: {section} must be a table ([{section}])", field="config")
        for key, value in table.items():
            if (section, key) not in known:
                raise InvalidInput(f"{path}: [{section}] has no setting {key!r}", field=key)
            found[key] = value
    return found


def load_config(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Config:
    """The configuration in force: defaults, the TOML file (``path``, else
    ``$EFFECTLEDGER_CONFIG``, else none), then the environment. Raises ``InvalidInput``."""
    env = os.environ if environ is None else environ
    named = path if path is not None else env.get(CONFIG_VARIABLE) or None
    from_file = {} if named is None else _read_file(Path(named))
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for setting in SETTINGS:
        if setting.variable in env and (not setting.secret or env[setting.variable]):
            raw, source = env[setting.variable], f"${setting.variable}"
        elif setting.key in from_file:
            raw, source = from_file[setting.key], f"{named} [{setting.section}]"
        else:
            values[setting.key], sources[setting.key] = setting.default, "default"
            continue
        try:
            values[setting.key] = setting.parse(raw)
        except ValueError as exc:
            shown = "(hidden)" if setting.secret else repr(raw)
            if setting.url:
                shown = redact(shown)
            raise InvalidInput(
                f"{setting.key} from {source} must be {exc}, not {shown}", field=setting.key
            ) from None
        sources[setting.key] = source
    return Config(values=values, sources=sources)
