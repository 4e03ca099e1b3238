"""Reading a private key file: UTF-8 text that only its owner may read (like an SSH key)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from effectledger.errors import EffectLedgerError

__all__ = ["read_private_file"]


def read_private_file(path: Path, what: str, error: type[EffectLedgerError]) -> str:
    """The text of the ``what`` file at ``path``; ``error`` if it cannot be read, is not UTF-8,
    or is accessible to group or others. The message names the file, never its content."""
    try:
        mode = path.stat().st_mode
        text = path.read_text("utf-8")
    except OSError as exc:
        raise error(f"cannot read the {what} file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"the {what} file {path} is not UTF-8 text") from exc
    if os.name == "posix" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise error(f"the {what} file {path} is accessible to group or others; chmod 600 it")
    return text
