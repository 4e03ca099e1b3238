"""Loading the application an ``--app MODULE:ATTRIBUTE`` option names, as uvicorn does.

The current folder comes first on the import path, so ``--app myapp:build`` finds ``myapp.py``
where the command runs. ``ATTRIBUTE`` (dotted names allowed) is an
:class:`~effectledger.app.EffectLedger` or a factory returning one: a factory that takes a
parameter is called with the store URL (``--db``), one that takes none is called without. Every
failure is one line naming the module and what went wrong: the module is not found, it raised
while being imported, it has no such attribute, or the attribute is not a ledger.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from effectledger.app import EffectLedger
from effectledger.errors import EffectLedgerError, InvalidInput

__all__ = ["load_attribute", "load_ledger"]


def _import(module_name: str, spec: str) -> Any:
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or module_name
        if module_name == missing or module_name.startswith(f"{missing}."):
            raise InvalidInput(
                f"cannot load {spec}: no module {missing!r} in {here} or on the Python path",
                field="app",
            ) from exc
        raise InvalidInput(
            f"cannot load {spec}: importing {module_name} needs {missing!r}, which is not "
            "installed",
            field="app",
        ) from exc
    except Exception as exc:  # the application's own import-time failure, in one line
        raise InvalidInput(
            f"cannot load {spec}: importing {module_name} raised {type(exc).__name__}: "
            f"{_one_line(exc)}",
            field="app",
        ) from exc


def load_attribute(spec: str) -> Any:
    """The object ``MODULE:ATTRIBUTE`` names, imported with the current folder on the path."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInput(f"--app must look like module:attribute, not {spec!r}", field="app")
    found = _import(module_name, spec)
    for part in attribute.split("."):
        try:
            found = getattr(found, part)
        except AttributeError:
            raise InvalidInput(
                f"cannot load {spec}: module {module_name} has no attribute {attribute!r}",
                field="app",
            ) from None
    return found


def _takes_a_parameter(factory: Any) -> bool:
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it bare
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters
    )


def load_ledger(spec: str, store_url: str | None = None) -> EffectLedger:
    """The :class:`EffectLedger` ``spec`` names: an instance, or a factory's result.

    A factory that takes a parameter gets ``store_url``; its own errors keep their codes, any
    other exception it raises is one ``invalid_input`` line naming it.
    """
    target = load_attribute(spec)
    if isinstance(target, EffectLedger):
        return target
    if not callable(target):
        raise InvalidInput(f"{spec} is neither an EffectLedger nor a factory of one", field="app")
    try:
        made = target(store_url) if _takes_a_parameter(target) else target()
    except EffectLedgerError:
        raise
    except Exception as exc:
        raise InvalidInput(
            f"{spec} raised {type(exc).__name__}: {_one_line(exc)}", field="app"
        ) from exc
    if not isinstance(made, EffectLedger):
        raise InvalidInput(
            f"{spec} returned {type(made).__name__}, not an EffectLedger", field="app"
        )
    return made


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] if text else "(no message)"
