"""``effectledger serve`` and ``effectledger keys create|revoke|list``: the HTTP API.

- ``serve --db URL --app MODULE:FACTORY [--host H] [--port P] [--worker]`` runs the HTTP API
  with uvicorn (extra ``server``). ``FACTORY(store_url)`` returns the application's
  :class:`~effectledger.EffectLedger` (``effectledger.connect(store_url)`` with its actions
  declared), or ``--app`` names the instance itself (:mod:`effectledger.cli.application`); the
  API keys live in the same ledger database. ``--service`` is an older spelling of ``--app``.
  ``--worker`` also runs the worker's loops (:mod:`effectledger.workers`) in the API process,
  stopped after the server has shut down. It serves only an existing ledger (``migrate``
  creates one): a mistyped URL is refused instead of serving an empty ledger.
- ``keys create --tenant T --actor A --roles r1,r2`` prints a new key's token, once.
- ``keys create``, ``keys revoke KEY_ID`` and ``keys list [--tenant T]`` only open an existing
  ledger; only ``migrate`` and ``demo`` create one.
"""

from __future__ import annotations

import argparse
import logging
import socket
from typing import TYPE_CHECKING, Any

from effectledger.app.config import Config, load_config
from effectledger.app.keys import ApiKeys
from effectledger.cli.application import load_attribute, load_ledger
from effectledger.cli.options import Commands, add_db, add_json, open_existing
from effectledger.cli.output import Output
from effectledger.cli.worker import (
    add_worker_options,
    ledger_gauges,
    log_to_stderr,
    stop_on_signals,
    worker_from,
)
from effectledger.errors import InvalidInput
from effectledger.extras import require_extra

if TYPE_CHECKING:
    from effectledger.callers.desk.sso import SsoSettings

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``serve`` and ``keys``."""
    serve = commands.add_parser(
        "serve",
        help="run the HTTP API (extra server)",
        description="Serve the HTTP API (OpenAPI at /openapi.json, health at /healthz) and the "
        "reviewer's desk at /desk.",
    )
    add_db(serve)
    serve.add_argument(
        "--app",
        "--service",
        dest="app",
        required=True,
        metavar="MODULE:FACTORY",
        help="a callable that takes the store URL and returns the EffectLedger to serve "
        "(or the EffectLedger itself)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    serve.add_argument(
        "--port", type=int, default=8000, help="port (default %(default)s; 0: any free port)"
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=64 * 1024,
        help="largest request body accepted (default %(default)s)",
    )
    serve.add_argument(
        "--worker",
        action="store_true",
        help="also run the worker (dispatch, recovery, sealing) in this process",
    )
    add_worker_options(serve)
    serve.add_argument(
        "--plain-http-cookies",
        action="store_true",
        help="send the desk's session cookie without the Secure flag (only behind no TLS)",
    )
    serve.set_defaults(handler=_serve)

    keys = commands.add_parser(
        "keys",
        help="create, revoke and list HTTP API keys",
        description="Create, revoke and list the API keys of the HTTP API (secrets shown once).",
    )
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create a key; its token is printed once")
    add_db(create)
    create.add_argument("--tenant", required=True, help="tenant the key acts in")
    create.add_argument("--actor", required=True, help="actor the key stands for")
    create.add_argument("--roles", default="", help="comma-separated roles, e.g. agent,approver")
    add_json(create)
    create.set_defaults(handler=_create)
    revoke = actions.add_parser("revoke", help="revoke a key (it stops working at once)")
    add_db(revoke)
    revoke.add_argument("key_id", help="the key's id (as listed)")
    add_json(revoke)
    revoke.set_defaults(handler=_revoke)
    listed = actions.add_parser("list", help="list keys, without their secrets")
    add_db(listed)
    listed.add_argument("--tenant", help="only this tenant's keys")
    add_json(listed)
    listed.set_defaults(handler=_list)


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host`` and ``port`` (0: a free one the system picks), so what
    ``serve`` prints names the port it listens on; ``InvalidInput`` if it cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio turns Nagle off only for sockets whose proto says TCP.
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror}", field="port") from exc
    listener.set_inheritable(True)
    return listener


def serving_lines(host: str, port: int, *, secure: bool) -> list[str]:
    """What ``serve`` prints before it listens: where the desk and the API are."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    lines = [
        f"the reviewer's desk: {base}/desk/ (log in with an approver's key: effectledger keys "
        "create --tenant T --actor NAME --roles approver)",
        f"the HTTP API: {base}/v1/ (OpenAPI at {base}/openapi.json; health at {base}/readyz)",
    ]
    if secure:
        lines.append(
            "the desk's cookies are Secure: a browser sends them over HTTPS and to localhost "
            "only; put TLS in front, or pass --plain-http-cookies on a network you trust"
        )
    return lines


def sso_settings(config: Config) -> SsoSettings | None:
    """The desk's single sign-on from the configuration (``[desk]``), or ``None`` without an
    issuer; ``InvalidInput`` for an issuer without a client id, secret or tenants."""
    if config["sso_issuer"] is None:
        return None
    missing = [name for name in ("sso_client_id", "sso_client_secret") if config[name] is None]
    if not config["sso_tenants"]:
        missing.append("sso_tenants")
    if missing:
        raise InvalidInput(
            "single sign-on needs " + ", ".join(missing) + " beside sso_issuer",
            field=missing[0],
        )
    require_extra("sso", "single sign-on")
    from effectledger.callers.desk.sso import SsoSettings

    return SsoSettings(
        issuer=config["sso_issuer"],
        client_id=config["sso_client_id"],
        client_secret=config["sso_client_secret"],
        tenants=frozenset(config["sso_tenants"]),
        tenant_claim=config["sso_tenant_claim"],
        roles_claim=config["sso_roles_claim"],
        actor_claim=config["sso_actor_claim"],
        scopes=tuple(config["sso_scopes"]),
        role_map=config["sso_role_map"] or None,
    )


def _serve(args: argparse.Namespace, out: Output) -> int:
    require_extra("server", "serve")
    import uvicorn

    from effectledger.callers.http.app import create_app

    if not 0 <= args.port < 65536:
        raise InvalidInput("--port must be from 0 (any free port) to 65535", field="port")
    load_attribute(args.app)  # a module or name that cannot load is refused first
    sso = sso_settings(load_config())  # a half-configured sign-on is refused before serving
    open_existing(args.db).close()  # the factory's connect would create a mistyped ledger
    ledger = load_ledger(args.app, args.db)
    worker = None
    gauges = ledger_gauges(ledger)
    try:
        if args.worker:
            worker = worker_from(ledger, args)
            log_to_stderr(args.log_format)
        app = create_app(
            ledger,
            ApiKeys(ledger.store),
            max_body_bytes=args.max_body_bytes,
            desk=True,
            secure_cookies=not args.plain_http_cookies,
            sso=sso,
        )
        if worker is not None:
            # uvicorn restores these handlers after its shutdown and re-raises the signal it
            # caught: then it stops the loops instead of ending the process under them.
            stop_on_signals(worker)
            worker.start()
        listener = listen(args.host, args.port)
        port = int(listener.getsockname()[1])
        for line in serving_lines(args.host, port, secure=not args.plain_http_cookies):
            out.line(line, err=True)
        config = uvicorn.Config(app, host=args.host, port=port, log_level="info", lifespan="off")
        uvicorn.Server(config).run(sockets=[listener])
    finally:
        if worker is not None:
            # uvicorn has finished its requests; the loops finish the operation in hand.
            worker.stop()
            worker.join()
            logging.getLogger("effectledger.workers").info("worker stopped")
        if gauges is not None:
            gauges.close()
        ledger.close()
    return 0


def _create(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        roles = [role.strip() for role in args.roles.split(",") if role.strip()]
        issued = ApiKeys(store).create(tenant_id=args.tenant, actor_id=args.actor, roles=roles)
    finally:
        store.close()
    if out.json_mode:
        out.json({"key_id": issued.key.key_id, "token": issued.token})
        return 0
    out.line(f"key id: {issued.key.key_id}")
    out.line(f"token:  {issued.token}")
    out.line("The token is shown only now; only its SHA-256 is stored.")
    return 0


def _revoke(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        key = ApiKeys(store).revoke(args.key_id)
    finally:
        store.close()
    when = key.revoked_at.isoformat() if key.revoked_at else None
    if out.json_mode:
        out.json({"key_id": key.key_id, "revoked_at": when})
    else:
        out.line(f"revoked {key.key_id} at {when or '?'}")
    return 0


def _list(args: argparse.Namespace, out: Output) -> int:
    store = open_existing(args.db)
    try:
        keys = ApiKeys(store).list(tenant_id=args.tenant)
    finally:
        store.close()
    rows: list[dict[str, Any]] = [
        {
            "key_id": key.key_id,
            "tenant_id": key.tenant_id,
            "actor_id": key.actor_id,
            "roles": sorted(key.roles),
            "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
        }
        for key in keys
    ]
    if out.json_mode:
        out.json({"keys": rows})
        return 0
    for row in rows:
        state = "live" if row["revoked_at"] is None else f"revoked {row['revoked_at']}"
        shown = ",".join(row["roles"]) or "-"
        out.line(f"{row['key_id']}  {row['tenant_id']}  {row['actor_id']}  {shown}  {state}")
    return 0
