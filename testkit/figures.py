"""Figures the tests and the benchmarks both compute."""

from __future__ import annotations


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of `values` (fraction 0..1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]
