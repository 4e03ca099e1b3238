"""``witness``: make a witness key, and serve a witness that cosigns log checkpoints."""

from __future__ import annotations

import argparse
import threading
from pathlib import Path

from effectledger.audit.keys.files import parse_verifiers, write_signer_key
from effectledger.audit.witnessing.cosign import Cosigner
from effectledger.cli.options import (
    Commands,
    add_json,
    on_stop_signals,
    read_text_file,
    restore_signals,
)
from effectledger.cli.output import Output
from effectledger.errors import InvalidInput

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Add ``witness keygen`` and ``witness serve``."""
    parser = commands.add_parser(
        "witness",
        help="an independent cosigner of checkpoints (C2SP tlog-witness)",
        description="Make a witness key, or serve a witness that keeps the latest checkpoint "
        "of each log and cosigns only consistent extensions of it.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    keygen = actions.add_parser(
        "keygen",
        help="create a witness key and print its verifier key",
        description="Print a new witness signer key string (secret) and its verifier key.",
    )
    keygen.add_argument("--name", required=True, help="the witness's name, e.g. witness.example/w1")
    keygen.add_argument("--out", type=Path, help="write the signer key to this new file (mode 600)")
    add_json(keygen)
    keygen.set_defaults(handler=_keygen)
    serve = actions.add_parser(
        "serve",
        help="serve POST /add-checkpoint until SIGTERM or SIGINT",
        description="Serve a witness over HTTP with its own SQLite file. Stops on SIGTERM or "
        "SIGINT (also when started with SIGINT ignored, as a background job is), closing "
        "its file.",
    )
    serve.add_argument("--db", type=Path, required=True, help="the witness's own SQLite file")
    serve.add_argument("--key-file", type=Path, required=True, help="the witness signer key file")
    serve.add_argument(
        "--log-key",
        action="append",
        required=True,
        metavar="VERIFIER_KEY",
        help="a log verifier key whose checkpoints it cosigns (repeatable)",
    )
    serve.add_argument(
        "--origin",
        action="append",
        help="witness only this log origin (repeatable; default: every effectledger/ origin)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="TCP port (default: any free port)")
    add_json(serve)
    serve.set_defaults(handler=_serve)


def _keygen(args: argparse.Namespace, out: Output) -> int:
    cosigner = Cosigner.generate(args.name)
    verifier = cosigner.verifier().key_string()
    if args.out is not None:
        write_signer_key(args.out, cosigner.key_string())
    if out.json_mode:
        out.json({"verifier_key": verifier, "signer_key_file": str(args.out or "")})
    elif args.out is None:
        out.line(f"signer key (secret): {cosigner.key_string()}")
        out.line(f"verifier key: {verifier}")
    else:
        out.line(verifier)
    return 0


def _serve(args: argparse.Namespace, out: Output) -> int:
    from effectledger.audit.witnessing.witness import Witness
    from effectledger.audit.witnessing.witness_http import serve_witness

    if not 0 <= args.port < 65536:
        raise InvalidInput("--port must be from 0 to 65535", field="port")
    cosigner = Cosigner.from_key_string(read_text_file(args.key_file, "witness key file").strip())
    witness = Witness(args.db, cosigner, parse_verifiers(args.log_key), origins=args.origin)
    stopping = threading.Event()
    previous = on_stop_signals(lambda number: stopping.set())
    server = None
    try:
        server = serve_witness(witness, args.host, args.port)
        host, port = server.server_address[:2]
        url = f"http://{host!s}:{port}"
        if out.json_mode:
            out.json({"url": url, "verifier_key": cosigner.verifier().key_string()})
        else:
            out.line(f"witness {cosigner.name} serving on {url}")
        while not stopping.wait(3600):
            pass
        if not out.json_mode:
            out.line("stopped")
    finally:
        restore_signals(previous)
        if server is not None:
            server.shutdown()
        witness.close()
    return 0
