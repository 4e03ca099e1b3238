"""Bytes a call allocates, as the benchmarks here measure it (imported by the benchmark scripts)."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

__all__ = ["peak_bytes_per_call"]


def peak_bytes_per_call(call: Callable[[], object], count: int) -> float:
    """Mean of tracemalloc's peak above the baseline during each of ``count`` calls."""
    gc.collect()
    tracemalloc.start()
    try:
        peaks = 0
        for _ in range(count):
            tracemalloc.reset_peak()
            before, _ = tracemalloc.get_traced_memory()
            call()
            _, peak = tracemalloc.get_traced_memory()
            peaks += peak - before
    finally:
        tracemalloc.stop()
    return peaks / count
