"""The HTTP classification table, the replay-window rules and secret headers (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from effectledger.destinations.http_contract import HttpContract, StatusRule
from effectledger.destinations.http_exchange import RequestNotSent, answer_from_error, prepare
from effectledger.destinations.secrets import (
    SecretUnavailable,
    callable_secret,
    env_secret,
    file_secret,
)
from effectledger.errors import InvalidInput
from effectledger.model.operations import Command, Outcome

httpx = pytest.importorskip("httpx")


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.ACCEPTED),
        (201, Outcome.ACCEPTED),
        (202, Outcome.ACCEPTED),
        (400, Outcome.PERMANENT_REJECTION),
        (422, Outcome.PERMANENT_REJECTION),
        (401, Outcome.RETRYABLE_REJECTION),
        (429, Outcome.RETRYABLE_REJECTION),
        (408, Outcome.UNKNOWN),
        (409, Outcome.UNKNOWN),
        (500, Outcome.UNKNOWN),
        (502, Outcome.UNKNOWN),
        (503, Outcome.UNKNOWN),
        (504, Outcome.UNKNOWN),
        (302, Outcome.UNKNOWN),
        (418, Outcome.UNKNOWN),
    ],
)
def test_default_table_classifies_statuses(status: int, outcome: Outcome) -> None:
    """The default table maps each status to the documented outcome; unlisted ones are Unknown."""
    assert HttpContract().classify(status, None)[0] is outcome


def test_rules_with_an_error_code_override_the_status_sets() -> None:
    """A rule for (409, key_reused) makes that answer permanent; other 409s stay Unknown."""
    rule = StatusRule(status=409, error_code="key_reused", outcome=Outcome.PERMANENT_REJECTION)
    contract = HttpContract(rules=(rule,))
    assert contract.classify(409, {"error": "key_reused"})[0] is Outcome.PERMANENT_REJECTION
    assert contract.classify(409, {"error": "key_in_flight"})[0] is Outcome.UNKNOWN


def test_every_class_is_overridable() -> None:
    """A contract that promises 503 means "not processed" may classify it as retryable."""
    contract = HttpContract(retryable=frozenset({429, 503}))
    assert contract.classify(503, None)[0] is Outcome.RETRYABLE_REJECTION


@pytest.mark.parametrize(
    "options",
    [
        {"replay_window": timedelta(seconds=5)},
        {"replay_window": timedelta(seconds=-1), "deduplicates_by_key": True},
        {"accepted": frozenset({200}), "permanent": frozenset({200})},
        {"retryable": frozenset({700})},
        {"max_resends": 11},
    ],
)
def test_inconsistent_contracts_are_refused(options: dict[str, object]) -> None:
    """A window without deduplication, overlapping classes or out-of-range values raise
    InvalidInput."""
    with pytest.raises(InvalidInput):
        HttpContract(**options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("error", "outcome", "sent"),
    [
        (httpx.ConnectError("x"), Outcome.RETRYABLE_REJECTION, False),
        (httpx.ConnectTimeout("x"), Outcome.RETRYABLE_REJECTION, False),
        (httpx.PoolTimeout("x"), Outcome.RETRYABLE_REJECTION, False),
        (httpx.ReadTimeout("x"), Outcome.UNKNOWN, True),
        (httpx.WriteTimeout("x"), Outcome.UNKNOWN, True),
        (httpx.ReadError("x"), Outcome.UNKNOWN, True),
        (httpx.RemoteProtocolError("x"), Outcome.UNKNOWN, True),
        (TimeoutError(), Outcome.UNKNOWN, True),
        (RuntimeError("secret text"), Outcome.UNKNOWN, True),
    ],
)
def test_transport_errors_before_sending_are_not_unknown(
    error: Exception, outcome: Outcome, sent: bool
) -> None:
    """Errors before any byte was sent are retryable; any later failure is Unknown; only the
    class name is kept, never the exception text."""
    answer = answer_from_error(error)
    assert (answer.outcome, answer.sent) == (outcome, sent)
    assert "secret text" not in answer.reason


def test_secret_headers_are_read_per_request_and_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Environment, file and callable secrets are formatted per request and never shown by
    repr; a missing one stops the request from being built."""
    monkeypatch.setenv("API_TOKEN", "tok-1")
    (tmp_path / "token").write_text("tok-2\n")
    env, path, call = (
        env_secret("API_TOKEN", "Bearer {secret}"),
        file_secret(tmp_path / "token"),
        callable_secret(lambda: "tok-3", name="vault"),
    )
    assert (env.value(), path.value(), call.value()) == ("Bearer tok-1", "tok-2", "tok-3")
    monkeypatch.setenv("API_TOKEN", "tok-rotated")
    assert env.value() == "Bearer tok-rotated"
    shown = repr(env) + repr(path) + repr(call)
    assert not any(value in shown for value in ("tok-1", "tok-2", "tok-3", "tok-rotated"))
    monkeypatch.delenv("API_TOKEN")
    with pytest.raises(SecretUnavailable):
        env.value()
    command = Command(action="a", contract_version="v1", arguments={})
    with pytest.raises(RequestNotSent) as refused:
        prepare("http://127.0.0.1:1", "POST", "/x", command=command, key="k",
                headers={"Authorization": env})  # fmt: skip
    assert refused.value.reason == "secret_unavailable"


def test_url_template_percent_encodes_and_hides_the_query() -> None:
    """Key and arguments are percent-encoded into the URL; the evidence URL drops the query."""
    command = Command(action="refund", contract_version="v1", arguments={"order": "a/b"})
    built = prepare("http://127.0.0.1:1", "get", "/orders/{order}/{key}?token=abc",
                    command=command, key="k 1", headers={})  # fmt: skip
    assert built.url == "http://127.0.0.1:1/orders/a%2Fb/k%201?token=abc"
    assert built.shown_url == "http://127.0.0.1:1/orders/a%2Fb/k%201"
    assert built.method == "GET"
    with pytest.raises(RequestNotSent):
        prepare("http://127.0.0.1:1", "GET", "/{missing}", command=command, key="k", headers={})


def test_sync_deadline_bounds_a_body_that_trickles_in() -> None:
    """A response whose body keeps arriving past the deadline is Unknown (deadline_passed), even
    though each single wait is shorter than the deadline."""
    import time

    from effectledger.destinations.http import HttpAction, HttpDestination, HttpLookup

    sent = []

    def trickle() -> Iterator[bytes]:
        for _ in range(600):  # a minute in all: far past the deadline, each wait far below it
            time.sleep(0.1)
            sent.append(1)
            yield b" "

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(201, content=trickle())

    target = HttpDestination(
        account_id="acct",
        endpoint="http://127.0.0.1:1",
        actions={"a": HttpAction(path="/x")},
        lookup=HttpLookup(path="/x/{key}"),
        submit_deadline_s=1.0,
        transport=httpx.MockTransport(handler),
    )
    observation = target.submit(Command(action="a", contract_version="v1"), "k")
    assert observation.outcome is Outcome.UNKNOWN
    assert observation.evidence is not None
    assert observation.evidence.document()["reason"] == "deadline_passed"
    assert len(sent) < 600  # ended by the deadline, before the body ended: an order, not a time
    target.close()
