"""The package as users install it: build the sdist and the wheel, install the wheel with the
``server`` extra into a fresh virtual environment, and use it from outside the checkout.

Run from the repository root with a Python that has ``build``::

    .venv/bin/python .ci/package_check.py

``python -m build`` builds the sdist and then the wheel from that sdist, as pip does from an
sdist. It checks that the sdist and the wheel carry what the editable install finds in the
checkout (the SQL files, the desk's templates and static assets), that ``effectledger demo``
runs from the installed wheel, and that ``effectledger serve --port 0`` started from it answers
``/healthz`` and serves the desk's login page with its stylesheet. Exit 0 when all hold;
otherwise it names the first that did not.
"""

from __future__ import annotations

import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = """
from pydantic import BaseModel, ConfigDict

from effectledger import SimulatedReceiver, connect


class Refund(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    order_id: str
    amount_minor: int
    currency: str


def build(url):
    receiver = SimulatedReceiver("receiver.db")
    ledger = connect(url)
    ledger.action(
        name="refund_order",
        contract="refund-v1",
        description="Refund an order, in minor units of its currency.",
        arguments=Refund,
        destination=receiver,
    )
    return ledger
"""


def step(message: str) -> None:
    print(f"package check: {message}", flush=True)


def fail(message: str) -> None:
    print(f"package check FAILED: {message}", file=sys.stderr, flush=True)
    raise SystemExit(1)


def run(*command: str | Path, cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        fail(f"{' '.join(map(str, command))} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def expected_files() -> list[str]:
    """The package's data files in the checkout, as paths inside the wheel."""
    package = ROOT / "src" / "effectledger"
    found = []
    for path in sorted(package.rglob("*")):
        if (
            path.is_file()
            and path.suffix not in {".py", ".pyc"}
            and "__pycache__" not in path.parts
        ):
            found.append("effectledger/" + path.relative_to(package).as_posix())
    return found


def served_address(server: subprocess.Popen[str], timeout: float = 120) -> str:
    """The base URL ``serve --port 0`` prints once it is bound (read on a thread, so a server
    that never says it is bound fails the check instead of hanging it)."""
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert server.stdout is not None
        for line in server.stdout:
            print(f"  serve: {line.rstrip()}", flush=True)
            match = re.search(r"the HTTP API: (http://[^/\s]+)/v1/", line)
            if match:
                found.put(match.group(1))
        found.put("")

    threading.Thread(target=read, daemon=True).start()
    try:
        base = found.get(timeout=timeout)
    except queue.Empty:
        base = ""
    if not base:
        server.kill()
        fail("serve printed no address it listens on")
    return base


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")


def main() -> int:
    scratch = Path(tempfile.mkdtemp(prefix="effectledger-package-"))
    try:
        dist = scratch / "dist"
        step("building the sdist and the wheel")
        run(sys.executable, "-m", "build", "--outdir", dist, ROOT, cwd=scratch)
        (wheel,) = dist.glob("effectledger-*.whl")
        (sdist,) = dist.glob("effectledger-*.tar.gz")
        names = set(zipfile.ZipFile(wheel).namelist())
        missing = [name for name in expected_files() if name not in names]
        if missing:
            fail(f"the wheel lacks {len(missing)} data file(s), e.g. {missing[:5]}")
        step(f"{wheel.name} carries every data file of the package ({len(expected_files())})")
        with tarfile.open(sdist) as archive:
            packed = set(archive.getnames())
        top = sdist.name.removesuffix(".tar.gz")
        in_sdist = {name.removeprefix(f"{top}/src/") for name in packed}
        missing = [name for name in expected_files() if name not in in_sdist]
        for name in ("pyproject.toml", "README.md"):
            if f"{top}/{name}" not in packed:
                missing.append(name)
        if missing:
            fail(f"the sdist lacks {len(missing)} file(s), e.g. {missing[:5]}")
        step(f"{sdist.name} carries them too, and the wheel was built from it")

        venv = scratch / "venv"
        run(sys.executable, "-m", "venv", venv, cwd=scratch)
        python = venv / "bin" / "python"
        step("installing the wheel with [server] into a fresh virtual environment")
        run(python, "-m", "pip", "install", "-q", f"{wheel}[server]", cwd=scratch)
        where = run(python, "-c", "import effectledger; print(effectledger.__file__)", cwd=scratch)
        if str(ROOT) in where:
            fail(f"effectledger was imported from the checkout: {where.strip()}")
        tool = venv / "bin" / "effectledger"

        work = scratch / "work"
        work.mkdir()
        step("effectledger demo, from the wheel")
        out = run(tool, "demo", "--dir", work / "demo", cwd=work)
        if "verif" not in out.lower():
            fail(f"the demo did not end with a verified bundle:\n{out}")

        (work / "app_check.py").write_text(APP, "utf-8")
        run(tool, "migrate", "--db", "sqlite:///served.db", cwd=work)
        step("effectledger serve --port 0, from the wheel")
        server = subprocess.Popen(
            [
                str(tool),
                "serve",
                "--db",
                "sqlite:///served.db",
                "--app",
                "app_check:build",
                "--port",
                "0",
            ],
            cwd=work,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(work)},
        )
        try:
            base = served_address(server)
            deadline = time.monotonic() + 60
            status = 0
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    status, _ = fetch(f"{base}/healthz")
                except OSError:
                    time.sleep(0.2)
                    continue
                if status == 200:
                    break
                time.sleep(0.2)
            if status != 200:
                server.kill()
                fail(f"serve did not answer /healthz at {base} (last status {status})")
            status, page = fetch(f"{base}/desk/login")
            if status != 200 or "<form" not in page:
                fail(f"the desk's login page answered {status}:\n{page[:500]}")
            sheets = [part.split('"', 1)[0] for part in page.split('href="')[1:]]
            styles = [href for href in sheets if href.endswith(".css")]
            if not styles:
                fail("the desk's login page links no stylesheet")
            status, _ = fetch(base + styles[0])
            if status != 200:
                fail(f"the desk's stylesheet {styles[0]} answered {status}")
            step("/healthz, the desk's login page and its stylesheet served from the wheel")
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    step("ok")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
