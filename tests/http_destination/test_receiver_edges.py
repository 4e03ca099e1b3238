"""The reference receiver's own edges: every route behind its token, faults behind a flag, and
deeply nested bodies refused, checked by the receiver's own counts."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from effectledger.receiver.server import RunningReceiver, serve
from tests.http_destination.conftest import TOKEN


def test_every_route_needs_the_token(served: RunningReceiver) -> None:
    """Without the token, stats and every other route answer 401 and change nothing."""
    with httpx.Client(base_url=served.url) as client:
        assert client.get("/_receiver/stats").status_code == 401
        assert client.put("/_receiver/faults", json={"drop_after_commit": 5}).status_code in (
            401,
            404,
            405,
        )
        assert client.post("/v1/effects", json={"a": 1},
                           headers={"Idempotency-Key": "k"}).status_code == 401  # fmt: skip
        assert client.get("/v1/effects/k").status_code == 401
        authorized = {"Authorization": f"Bearer {TOKEN}"}
        assert client.get("/_receiver/stats", headers=authorized).json()["submissions"] == 0
    assert served.faults.drop_after_commit == 0


def test_fault_switches_over_http_need_the_flag_and_the_token(tmp_path: Path) -> None:
    """Without allow_faults there is no fault route even with the token; with it, the route
    still refuses a request without the token, and accepts one with it."""
    authorized = {"Authorization": f"Bearer {TOKEN}"}
    with serve(tmp_path / "a.db", token=TOKEN) as plain, httpx.Client(base_url=plain.url) as c:
        refused = c.put("/_receiver/faults", json={"error_after_commit": 3}, headers=authorized)
        assert refused.status_code in (404, 405)
        assert plain.faults.error_after_commit == 0
    with (
        serve(tmp_path / "b.db", token=TOKEN, allow_faults=True) as testing,
        httpx.Client(base_url=testing.url) as client,
    ):
        assert client.put("/_receiver/faults", json={"throttle": 2}).status_code == 401
        assert testing.faults.throttle == 0
        done = client.put("/_receiver/faults", json={"throttle": 2}, headers=authorized)
        assert done.status_code == 200
        assert testing.faults.throttle == 2


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        (
            {"throttle": 2, "drop_after_comit": 1},
            "drop_after_comit",
            "no switch 'drop_after_comit'",
        ),
        ({"throttle": 2, "drop_after_commit": True}, "drop_after_commit", "a whole number"),
        ({"throttle": 2, "slow_reply_s": "5"}, "slow_reply_s", "a number of seconds"),
        ({"throttle": -1}, "throttle", "0 or more"),
        ([1], "body", "a JSON object"),
    ],
)
def test_a_bad_fault_change_names_its_field_and_changes_no_switch(
    tmp_path: Path, body: object, field: str, says: str
) -> None:
    """A fault change with an unknown switch or a value of the wrong kind answers 400 naming the
    switch and what it takes, and sets none of the switches it named (all or none)."""
    authorized = {"Authorization": f"Bearer {TOKEN}"}
    with (
        serve(tmp_path / "r.db", token=TOKEN, allow_faults=True) as testing,
        httpx.Client(base_url=testing.url) as client,
    ):
        refused = client.put("/_receiver/faults", json=body, headers=authorized)
        assert refused.status_code == 400
        answer = refused.json()
        assert (answer["error"], answer["field"]) == ("bad_faults", field)
        assert says in answer["message"]
        assert testing.faults.throttle == 0  # the valid switch beside the bad one was not set


@pytest.mark.parametrize("depth", [100_000, 5_000])
def test_a_deeply_nested_body_is_refused_with_400(served: RunningReceiver, depth: int) -> None:
    """A body nested so deep that it cannot be parsed or encoded is 400, and no effect is made."""
    content = b'{"a":' * depth + b"1" + b"}" * depth
    with httpx.Client(base_url=served.url) as client:
        answer = client.post(
            "/v1/effects",
            content=content,
            headers={"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "k-deep",
                     "Content-Type": "application/json"},
        )  # fmt: skip
    assert answer.status_code == 400
    assert served.store.counts().effects == 0
