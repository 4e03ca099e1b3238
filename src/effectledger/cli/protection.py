"""The ledger's keys on the command line: ``--key-dir``, what ``migrate`` makes, what
``status --summary`` shows (:mod:`effectledger.app.protection`).

Only the public verifier key is ever printed; the trail key is named by its id.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from effectledger.app.config import load_config
from effectledger.app.protection import LedgerKeys, create_keys, find_keys, sealer_memory_for
from effectledger.cli.output import Output
from effectledger.errors import EffectLedgerError, InvalidInput, LogKeyInvalid
from effectledger.events.authentication import (
    TrailKeys,
    load_trail_keys,
    trail_keys_from_environment,
)
from effectledger.keyfiles import KEY_DIR_ENV, LOG_KEY_FILE, TRAIL_KEYS_FILE, key_directory_for
from effectledger.store import Store

if TYPE_CHECKING:
    from effectledger.audit.keys.signers import Signer

__all__ = [
    "add_key_dir",
    "check_key_dir",
    "configured_key_dir",
    "found_trail_keys",
    "key_document",
    "log_signer",
    "migrate_keys",
    "sealer_memory",
    "shown_keys",
    "summary_lines",
]


def add_key_dir(parser: argparse.ArgumentParser) -> None:
    """``--key-dir DIR``: the ledger's key directory (default: the ``key_dir`` setting)."""
    parser.add_argument(
        "--key-dir",
        metavar="DIR",
        help=f"the ledger's key directory (default: the key_dir setting, ${KEY_DIR_ENV}, else "
        "beside an SQLite file: ledger.db.keys; required for PostgreSQL)",
    )


def configured_key_dir(args: argparse.Namespace) -> str | None:
    """``--key-dir`` if given, else the configured ``key_dir`` (``None`` when neither is)."""
    given: str | None = getattr(args, "key_dir", None)
    return given if given else load_config()["key_dir"]


def log_signer(args: argparse.Namespace) -> Signer:
    """The log key of ``audit seal`` / ``rotate-key``: ``--key-file``, else
    ``$EFFECTLEDGER_LOG_KEY``, else the key directory's ``log.key``; ``LogKeyInvalid`` if none."""
    from effectledger.audit.keys.files import KEY_ENV, load_signer

    if args.key_file is not None or os.environ.get(KEY_ENV, "").strip():
        return load_signer(args.key_file)
    try:
        directory = key_directory_for(args.db, configured_key_dir(args))
    except InvalidInput:
        directory = None
    if directory is not None and (directory / LOG_KEY_FILE).exists():
        return load_signer(directory / LOG_KEY_FILE)
    where = "" if directory is None else f", and {directory / LOG_KEY_FILE} does not exist"
    raise LogKeyInvalid(
        f"no log key: pass a key file, set {KEY_ENV} or give the ledger a key directory "
        f"(--key-dir){where}"
    )


def found_trail_keys(args: argparse.Namespace) -> TrailKeys | None:
    """The ledger's trail keys for a command that checks tags (``audit seal``, ``audit explain``):
    ``$EFFECTLEDGER_TRAIL_KEY``, else the key directory's ``trail.keys``; ``None`` when neither
    holds one (a ledger without a trail key)."""
    found = trail_keys_from_environment()
    if found is not None:
        return found
    try:
        directory = key_directory_for(args.db, configured_key_dir(args))
    except InvalidInput:
        return None
    file = directory / TRAIL_KEYS_FILE
    return load_trail_keys(file) if file.exists() else None


def sealer_memory(args: argparse.Namespace) -> Path | None:
    """The memory of ``audit seal``: ``--memory``, else none with ``--no-memory``, else the key
    directory's ``sealer-memory.json`` (the one the worker keeps too) when there is one."""
    given: Path | None = getattr(args, "memory", None)
    if given is not None:
        if getattr(args, "no_memory", False):
            raise InvalidInput("--memory and --no-memory contradict", field="memory")
        return given
    if getattr(args, "no_memory", False):
        return None
    return sealer_memory_for(args.db, configured_key_dir(args))


def key_document(keys: LedgerKeys) -> dict[str, Any]:
    """The keys as JSON data: where, the trail key's id, the verifier key, what is exposed."""
    return {
        "key_dir": None if keys.directory is None else str(keys.directory),
        "created": keys.created,
        "trail_key": None if keys.trail_keys is None else keys.trail_keys.current.key_id,
        "verifier_key": keys.verifier_key(),
        "unprotected": list(keys.exposed),
    }


def _lines(out: Output, document: dict[str, Any]) -> None:
    where = document["key_dir"] or "the environment"
    if document["created"]:
        out.line(f"created a trail key and a log key in {where} (mode 600; back it up)")
    elif not document["unprotected"]:
        out.line(f"keys: trail key {document['trail_key']} and the log key, in {where}")
    if document["verifier_key"]:
        out.line(f"verifier key (give it to reviewers): {document['verifier_key']}")
    for sentence in document["unprotected"]:
        out.line(f"UNPROTECTED: {sentence}")


def migrate_keys(store: Store, args: argparse.Namespace, out: Output) -> dict[str, Any] | None:
    """The keys of the ledger ``migrate`` just brought up to date, made if it is new (or on
    ``--create-keys``); ``None`` with ``--no-keys``. Prints them unless ``--json``."""
    if args.no_keys:
        if args.create_keys:
            raise InvalidInput("--no-keys and --create-keys contradict", field="no_keys")
        out.line(
            "UNPROTECTED: migrated with --no-keys: the ledger opens without a trail key and a "
            "log key until `effectledger migrate --create-keys` makes them",
            err=True,
        )
        return None
    key_dir = configured_key_dir(args)
    keys = find_keys(store, args.db, key_dir=key_dir, create=True, environ={})
    if keys.exposed and args.create_keys and keys.directory is not None:
        if keys.directory.exists():
            raise InvalidInput(
                f"the key directory {keys.directory} exists but lacks a key; restore it from "
                'its backup (docs/operating.md, "Keys")',
                field="key_dir",
            )
        keys = create_keys(keys.directory)
    document = key_document(keys)
    if out.json_mode:
        return document
    _lines(out, document)
    if keys.exposed:
        out.line(
            "this ledger already holds events and has no key directory: "
            '`effectledger migrate --create-keys` makes one (docs/operating.md, "Keys", says '
            "what becomes of operations admitted before)"
        )
    return document


def check_key_dir(args: argparse.Namespace) -> None:
    """Refuse, before anything is migrated, a ledger whose key directory cannot be named."""
    if not args.no_keys:
        key_directory_for(args.db, configured_key_dir(args))


def shown_keys(store: Store, args: argparse.Namespace) -> dict[str, Any]:
    """What ``status --summary`` says of the keys a worker opening this ledger would find."""
    try:
        return key_document(find_keys(store, args.db, key_dir=configured_key_dir(args)))
    except EffectLedgerError as exc:  # no directory to look in, or a key that cannot be used
        unconfigured = isinstance(exc, InvalidInput) and exc.details.get("field") == "key_dir"
        problem = "no key directory is configured" if unconfigured else exc.message
        return {**key_document(LedgerKeys(None)), "problem": problem}


def summary_lines(out: Output, document: dict[str, Any]) -> None:
    """The keys' lines of ``status --summary``."""
    if document.get("problem"):
        out.line(f"keys: {document['problem']}")
    _lines(out, document)
