"""Sealing on a schedule: pass after pass, each one reporting whether an event waited too long.

A sealing service runs :func:`seal_periodically` so that no event waits longer than a maximum
delay for its log position: passes run every half maximum delay, and a pass that sealed an event
recorded longer ago than the maximum, or leaves one waiting that long, is marked late.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from effectledger.audit.sealing.sealer import LogSealer, SealReport
from effectledger.errors import InvalidInput

__all__ = ["SealPass", "seal_periodically"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SealPass:
    """One tenant's result in one pass; ``late`` when an event waited longer than the maximum."""

    report: SealReport
    late: bool


def seal_periodically(
    sealer: LogSealer,
    tenant_id: str | None,
    *,
    max_delay: timedelta,
    sleep: Callable[[float], object] = time.sleep,
    passes: int | None = None,
) -> Iterator[SealPass]:
    """Seal ``tenant_id`` (every tenant when ``None``) every ``max_delay / 2``, forever or for
    ``passes`` passes, yielding each tenant's result as soon as it is sealed.
    """
    if max_delay <= timedelta(0):
        raise InvalidInput("the maximum delay must be positive", field="max_delay")
    done = 0
    while passes is None or done < passes:
        reports = [sealer.seal(tenant_id)] if tenant_id else sealer.seal_all()
        for report in reports:
            waited = [d for d in (report.max_delay, report.oldest_pending_age) if d is not None]
            yield SealPass(report=report, late=any(delay > max_delay for delay in waited))
        done += 1
        if passes is None or done < passes:
            sleep(max_delay.total_seconds() / 2)
