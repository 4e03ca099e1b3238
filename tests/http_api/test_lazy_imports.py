"""The server extra stays optional: importing effectledger does not import the web stack."""

from __future__ import annotations

import subprocess
import sys


def test_import_effectledger_does_not_import_the_server_extra() -> None:
    """``import effectledger`` (and the API keys module the CLI uses) load no FastAPI or uvicorn."""
    code = (
        "import sys, effectledger, effectledger.app.keys\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules}"
        " & {'fastapi', 'starlette', 'uvicorn', 'httpx', 'schemathesis'})\n"
        "print(','.join(loaded))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == ""
