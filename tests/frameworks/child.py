"""A fresh process that resumes a saved framework state: ``python -m tests.frameworks.child``.

Arguments: framework, store URL, world folder, the pickled pause, a start file to wait for.
It opens its own ledger and receiver objects on the same files, resumes as the agent with the
grant, and prints the tool's JSON answer.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from effectledger import ManualClock
from tests.callers.scenarios import AGENT, build_world
from tests.frameworks.drivers import DRIVERS, LangGraphDriver

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")


def saver_contents(driver: LangGraphDriver) -> dict[str, Any]:
    """The checkpoints of a LangGraph driver as plain dicts (they pickle)."""
    saver = driver.saver
    storage = {k: {n: dict(v) for n, v in inner.items()} for k, inner in saver.storage.items()}
    return {"storage": storage, "writes": dict(saver.writes), "blobs": dict(saver.blobs)}


def load_saver(driver: LangGraphDriver, contents: dict[str, Any]) -> None:
    """Put pickled checkpoints into a new driver's saver."""
    saver = driver.saver
    for key, inner in contents["storage"].items():
        for namespace, checkpoints in inner.items():
            saver.storage[key][namespace].update(checkpoints)
    for key, writes in contents["writes"].items():
        saver.writes[key].update(writes)
    saver.blobs.update(contents["blobs"])


def main() -> None:
    framework, store_url, folder, pause_file, start_file = sys.argv[1:6]
    world = build_world(store_url, Path(folder), ManualClock())
    try:
        driver = DRIVERS[framework](world.app)
        paused, grant, checkpoints = pickle.loads(Path(pause_file).read_bytes())
        if checkpoints is not None:
            load_saver(driver, checkpoints)  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while not Path(start_file).exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        print(json.dumps(driver.resume(paused, AGENT, grant)))
    finally:
        world.close()


if __name__ == "__main__":
    main()
