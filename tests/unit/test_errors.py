"""The error tree: one root, stable unique codes, and a public API that says what it exports."""

from __future__ import annotations

import inspect

import effectledger
from effectledger import errors


def _error_classes() -> list[type[errors.EffectLedgerError]]:
    return [
        value
        for value in vars(errors).values()
        if inspect.isclass(value) and issubclass(value, errors.EffectLedgerError)
    ]


def test_every_error_has_a_unique_stable_code() -> None:
    """No two error classes share a code, and every code is snake_case."""
    codes = [cls.code for cls in _error_classes()]
    assert len(codes) == len(set(codes))
    assert all(code.replace("_", "").isalpha() and code.islower() for code in codes)


def test_the_tree_is_drawn_in_the_module_docstring() -> None:
    """Every error class and its code appear in the tree drawn in the module docstring."""
    doc = errors.__doc__ or ""
    for cls in _error_classes():
        assert cls.__name__ in doc
        assert cls.code in doc


def test_errors_serialize_with_code_and_details() -> None:
    """An error becomes a JSON-ready body with its stable code."""
    error = errors.AdmissionConflict("differs", differs=["revision"])
    assert error.to_dict() == {
        "code": "admission_conflict",
        "message": "differs",
        "details": {"differs": ["revision"]},
    }
    assert error.status == 409


def test_public_names_match_all() -> None:
    """``effectledger.__all__`` lists exactly the public names the package exports."""
    public = {name for name in vars(effectledger) if not name.startswith("_")} | {"__version__"}
    modules = {name for name in public if inspect.ismodule(getattr(effectledger, name))}
    assert set(effectledger.__all__) == public - modules
    assert sorted(effectledger.__all__) == effectledger.__all__
