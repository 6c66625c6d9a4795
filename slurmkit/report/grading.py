"""Efficiency grades from mean GPU utilization. The thresholds are data, printed with every graded report."""

from __future__ import annotations

import math

# (grade, minimum mean utilization %), best first. Princeton's jobstats reports cluster means around 50 %,
# so C (30-50 %) is "typical", A needs the GPUs busy most of the time.
THRESHOLDS: tuple[tuple[str, float], ...] = (("A", 70.0), ("B", 50.0), ("C", 30.0), ("D", 15.0), ("F", 0.0))
NO_METRICS = "n/a"


def grade(mean_util_pct: float | None) -> str:
    """The grade for a mean utilization; 'n/a' when nothing was measured (not an F: no data is not 0 %)."""
    if mean_util_pct is None or (isinstance(mean_util_pct, float) and math.isnan(mean_util_pct)):
        return NO_METRICS
    for name, lower in THRESHOLDS:
        if mean_util_pct >= lower:
            return name
    return THRESHOLDS[-1][0]


def legend() -> str:
    parts = []
    upper = None
    for name, lower in THRESHOLDS:
        if upper is None:
            parts.append(f"{name} >= {lower:g} %")
        elif lower == 0:
            parts.append(f"{name} < {upper:g} %")
        else:
            parts.append(f"{name} {lower:g}-{upper:g} %")
        upper = lower
    return ("grades by mean GPU utilization: " + ", ".join(parts)
            + f"; {NO_METRICS} = no GPU metrics (not graded)")
