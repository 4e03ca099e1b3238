"""The operator's figures: ``EffectLedger.summary``, ``status --summary`` and ``/metrics``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from effectledger import Context, ManualClock, NotPermitted
from effectledger.app.keys import ApiKeys
from effectledger.audit.keys.signers import Signer
from effectledger.callers.http.app import create_app
from effectledger.telemetry import GAUGES, SCOPE
from tests.acceptance.test_authority_matrix import AGENT, REVIEWER
from tests.http_api.server import serving
from tests.worker.support import Refunds, refunds

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def clock() -> ManualClock:
    """The world's clock."""
    return ManualClock()


@pytest.fixture
def world(store_url: str, tmp_path: Path, clock: ManualClock) -> Iterator[Refunds]:
    """Two READY refunds, one performed, one whose reply was lost, 40 s ago."""
    made = refunds(store_url, tmp_path, clock=clock, signer=Signer("log.example/s", bytes(32)))
    made.ready(2)
    performed = made.app.propose(AGENT, "refund_order", {"order_id": "ord-1", "amount_minor": 5,
                                                          "currency": "EUR"})  # fmt: skip
    made.app.approve(REVIEWER, performed)
    made.app.perform(AGENT, performed)
    made.uncertain(1)
    clock.advance(timedelta(seconds=40))
    yield made
    made.close()


def test_the_summary_counts_states_the_uncertain_age_and_the_seal_lag(world: Refunds) -> None:
    """Two READY, one SUCCEEDED, one OUTCOME_UNKNOWN unchanged for 40 s, events waiting 40 s;
    sealing empties the pending count; an agent may not read the tenant's figures."""
    summary = world.app.summary(REVIEWER)
    assert {k: v for k, v in summary.by_state.items() if v} == {
        "READY": 2,
        "SUCCEEDED": 1,
        "OUTCOME_UNKNOWN": 1,
    }
    assert summary.uncertain == 1
    assert summary.oldest_uncertain_age == timedelta(seconds=40)
    assert summary.seal_pending > 0
    assert summary.seal_lag is not None
    assert summary.seal_lag >= timedelta(seconds=40)
    world.app.seal(REVIEWER)
    after = world.app.summary(REVIEWER)
    assert (after.seal_pending, after.seal_lag) == (0, None)
    assert world.app.summary(Context(tenant_id="globex", actor_id="rita", roles=REVIEWER.roles))
    with pytest.raises(NotPermitted):
        world.app.summary(AGENT)
    text = summary.prometheus()
    assert (
        'effectledger_operations{effectledger_tenant_id="acme",effectledger_state="READY"} 2'
        in text
    )
    assert 'effectledger_uncertain_oldest_age_seconds{effectledger_tenant_id="acme"} 40.000' in text


@pytest.mark.slow
def test_status_summary_prints_the_same_figures(world: Refunds, store_url: str) -> None:
    """``status --summary --json`` reports the states, the uncertain one and exits 3 on it."""
    done = subprocess.run(
        [sys.executable, "-m", "effectledger.cli", "status", "--db", store_url, "--tenant",
         "acme", "--summary", "--json", "--fail-on-uncertain"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    document = json.loads(done.stdout)
    assert (document["operations"]["READY"], document["uncertain"]) == (2, 1)
    assert document["seal_pending"] > 0


def test_metrics_serves_the_key_tenants_figures_to_a_reviewer_only(world: Refunds) -> None:
    """``/metrics`` answers a reviewer's key with the Prometheus text, an agent's with 403."""
    keys = ApiKeys(world.app.store)
    reviewer = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
    agent = keys.create(tenant_id="acme", actor_id="agent-7", roles=["agent"]).token
    with serving(create_app(world.app, keys)) as base, httpx.Client(base_url=base) as client:
        answer = client.get("/metrics", headers={"Authorization": f"Bearer {reviewer}"})
        refused = client.get("/metrics", headers={"Authorization": f"Bearer {agent}"})
        anonymous = client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert 'effectledger_uncertain_operations{effectledger_tenant_id="acme"} 1' in answer.text
    assert (refused.status_code, anonymous.status_code) == (403, 401)


def _alert_rules() -> list[tuple[str, str, float]]:
    """(label, metric, bound) of each ``max by (label) (metric) > bound`` rule in the docs."""
    text = _operating()
    rules = re.findall(r"expr: max by \((\w+)\) \((\w+)\) > ([0-9.]+)", text)
    return [(label, metric, float(bound)) for label, metric, bound in rules]


def test_the_docs_alert_rules_read_the_real_metrics(world: Refunds, clock: ManualClock) -> None:
    """Each alert rule in docs/operating.md names a metric ``/metrics`` serves, with the label
    it groups by; against the served figures, the uncertain-too-long rule fires once the
    uncertain refund is older than its bound and the sealing rule once the log lags."""
    rules = _alert_rules()
    assert {metric for _, metric, _ in rules} == {
        "effectledger_uncertain_oldest_age_seconds",
        "effectledger_seal_lag_seconds",
    }
    keys = ApiKeys(world.app.store)
    reviewer = keys.create(tenant_id="acme", actor_id="rita", roles=["approver"]).token
    clock.advance(timedelta(seconds=601))
    with serving(create_app(world.app, keys)) as base, httpx.Client(base_url=base) as client:
        served = client.get("/metrics", headers={"Authorization": f"Bearer {reviewer}"}).text
    samples = {
        (metric, labels): float(value)
        for metric, labels, value in re.findall(r"^(\w+)\{([^}]*)\} (\S+)$", served, re.M)
    }
    for label, metric, bound in rules:
        (value,) = [v for (m, labels), v in samples.items() if m == metric and
                    re.fullmatch(rf'{label}="acme"', labels)]  # fmt: skip
        assert value > bound, (metric, value, bound)
    # The page-a-human rule's selector names a series /metrics serves, with its labels.
    selector = re.search(r"`(effectledger_operations)\{(\w+)=\"(\w+)\"\}`", _operating())
    assert selector is not None
    metric, label, state = selector.groups()
    assert any(m == metric and f'{label}="{state}"' in labels for m, labels in samples)


def _operating() -> str:
    return (ROOT / "docs" / "operating.md").read_text("utf-8")


def _prometheus_name(name: str, unit: str) -> str:
    """What an OpenTelemetry Prometheus exporter calls gauge ``effectledger.<name>``: dots to
    underscores, a unit of seconds as the ``_seconds`` suffix, an annotation unit ({...})
    dropped (the OpenTelemetry specification's Prometheus compatibility rules)."""
    exported = f"{SCOPE}.{name}".replace(".", "_")
    return exported + "_seconds" if unit == "s" else exported


def test_metrics_names_its_series_as_the_gauges_are_exported(world: Refunds) -> None:
    """``/metrics`` serves each gauge under the name and labels an OpenTelemetry Prometheus
    exporter gives it, so one alert rule reads either source, and nothing else."""
    served = world.app.summary(REVIEWER).prometheus()
    types = dict(re.findall(r"^# TYPE (\w+) (\w+)$", served, re.M))
    assert types == {_prometheus_name(name, unit): "gauge" for name, (unit, _) in GAUGES.items()}
    labels = {label for series in re.findall(r"\{([^}]*)\}", served)
              for label in re.findall(r"(\w+)=", series)}  # fmt: skip
    assert labels == {"effectledger_tenant_id", "effectledger_state"}
