"""The ``serve`` and ``keys`` commands of the ``effectledger`` command line.

:func:`register` adds them to an ``argparse`` sub-parser set; each command's handler is
:func:`run` (also stored as the ``http_handler`` default).
``python -m effectledger.callers.http_cli`` runs them on their own.

- ``serve --db URL --service MODULE:FACTORY [--host H] [--port P]`` runs the HTTP API with uvicorn.
  ``FACTORY(store_url)`` returns the :class:`~effectledger.service.EffectService` (the
  application's actions and destinations); the API keys live in the same ledger database.
- ``keys create --tenant T --actor A --roles r1,r2`` prints a new key's token, once.
- ``keys revoke KEY_ID`` and ``keys list [--tenant T]`` only touch an existing ledger: they never
  create a database or a schema.

Exit codes: 0 success; 1 an effectledger error (the message names its stable code); 2 usage.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from effectledger.callers.api_keys import ApiKeys
from effectledger.errors import EffectLedgerError, InvalidInput, NotFound
from effectledger.service import EffectService
from effectledger.store import Store, open_store

__all__ = ["main", "open_existing_store", "register", "run"]

DEFAULT_DB = "sqlite:///effectledger.db"


def _db_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=os.environ.get("EFFECTLEDGER_DB", DEFAULT_DB),
        help="store URL: sqlite:///path.db or postgresql://... "
        "(default: $EFFECTLEDGER_DB or %(default)s)",
    )


def register(subparsers: Any) -> None:
    """Add ``serve`` and ``keys create|revoke|list`` to ``subparsers`` (from add_subparsers)."""
    serve = subparsers.add_parser(
        "serve",
        help="run the HTTP API",
        description="Serve the HTTP API (OpenAPI at /openapi.json, health at /healthz).",
    )
    _db_argument(serve)
    serve.add_argument(
        "--service",
        required=True,
        metavar="MODULE:FACTORY",
        help="a callable that takes the store URL and returns the EffectService to serve",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port (default %(default)s)")
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=64 * 1024,
        help="largest request body accepted (default %(default)s)",
    )
    serve.set_defaults(http_handler=run)

    keys = subparsers.add_parser("keys", help="create, revoke and list HTTP API keys")
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a key; its token is printed once")
    _db_argument(create)
    create.add_argument("--tenant", required=True, help="tenant the key acts in")
    create.add_argument("--actor", required=True, help="actor the key stands for")
    create.add_argument("--roles", default="", help="comma-separated roles, e.g. agent,approver")
    revoke = actions.add_parser("revoke", help="revoke a key (it stops working at once)")
    _db_argument(revoke)
    revoke.add_argument("key_id", help="the key's id (as listed)")
    listed = actions.add_parser("list", help="list keys, without their secrets")
    _db_argument(listed)
    listed.add_argument("--tenant", help="only this tenant's keys")
    keys.set_defaults(http_handler=run)


def open_existing_store(url: str) -> Store:
    """Open the ledger at ``url`` without creating a database or migrating its schema."""
    if url.startswith("sqlite:"):
        path = urlsplit(url).path[1:]
        if not path or not Path(path).is_file():
            raise NotFound(f"no ledger database at {url}", url=url)
    return open_store(url, migrate=False)


def load_factory(spec: str) -> Any:
    """The callable named ``MODULE:NAME``."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise InvalidInput(f"--service takes MODULE:FACTORY, not {spec!r}", field="service")
    try:
        factory = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise InvalidInput(f"cannot load {spec}: {exc}", field="service") from exc
    if not callable(factory):
        raise InvalidInput(f"{spec} is not callable", field="service")
    return factory


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from effectledger.callers.http_api import create_app

    service = load_factory(args.service)(args.db)
    if not isinstance(service, EffectService):
        raise InvalidInput(f"{args.service} did not return an EffectService", field="service")
    app = create_app(service, ApiKeys(service.ledger.store), max_body_bytes=args.max_body_bytes)
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="info", lifespan="off")
    finally:
        service.ledger.store.close()
    return 0


def _keys(args: argparse.Namespace) -> int:
    store = open_store(args.db) if args.keys_command == "create" else open_existing_store(args.db)
    try:
        keys = ApiKeys(store)
        if args.keys_command == "create":
            roles = [role.strip() for role in args.roles.split(",") if role.strip()]
            issued = keys.create(tenant_id=args.tenant, actor_id=args.actor, roles=roles)
            print(f"key id: {issued.key.key_id}")
            print(f"token:  {issued.token}")
            print("The token is shown only now; only its SHA-256 is stored.")
            return 0
        if args.keys_command == "revoke":
            key = keys.revoke(args.key_id)
            print(
                f"revoked {key.key_id} at {key.revoked_at.isoformat() if key.revoked_at else '?'}"
            )
            return 0
        for key in keys.list(tenant_id=args.tenant):
            state = "live" if key.revoked_at is None else f"revoked {key.revoked_at.isoformat()}"
            shown = ",".join(sorted(key.roles)) or "-"
            print(f"{key.key_id}  {key.tenant_id}  {key.actor_id}  {shown}  {state}")
        return 0
    finally:
        store.close()


def run(args: argparse.Namespace) -> int:
    """Run the ``serve`` or ``keys`` command parsed into ``args``; return the exit code."""
    try:
        if args.command == "serve":
            return _serve(args)
        return _keys(args)
    except EffectLedgerError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as ``serve ...`` or ``keys ...`` and run it."""
    parser = argparse.ArgumentParser(prog="effectledger")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
