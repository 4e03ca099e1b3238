"""Steps a person takes on the desk, and the accessibility check run in the same browser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.desk.conftest import ARTIFACTS, Desk

SERIOUS = {"serious", "critical"}


def axe_source() -> str:
    """axe-core's script as the axe-playwright-python package ships it (nothing downloaded)."""
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text("utf-8")


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations of the page as it stands."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(axe_source())  # through the debugger protocol: the page's CSP stays on
    results = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]]}
        for v in results["violations"]
        if v["impact"] in SERIOUS
    ]


def shot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under the artifacts folder; its path."""
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def log_in(page: Any, desk: Desk, who: str) -> None:
    """Log in on the desk's login page with ``who``'s API key, as a person would type it."""
    page.goto(f"{desk.base}/desk/login")
    page.get_by_label("API key").fill(desk.tokens[who])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{desk.base}/desk/")
