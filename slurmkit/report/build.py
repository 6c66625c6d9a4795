"""Assemble a report: run the aggregate query, derive the ratio figures, grade, and attach every note a reader
needs (the window and zone, definitions, thresholds, metric sources, whose jobs are shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slurmkit.errors import InputError, Problem
from slurmkit.record import BY_SOURCE, IDLE_UTIL_PCT
from slurmkit.report import grading
from slurmkit.report.figures import COLUMNS, definitions
from slurmkit.report.query import Scope, run_aggregate, run_idle_jobs, source_columns
from slurmkit.report.window import Window
from slurmkit.store.db import Store

ADDITIVE = ["jobs", "gpu_hours", "gpu_hours_measured", "gpu_hours_used", "gpu_hours_wasted",
            "idle_gpus_in_multi", "idle_gpu_hours_in_multi", "jobs_no_metrics", "wait_s_sum", "wait_n"]

NEED_METRICS = ["gpu_hours_used", "gpu_hours_wasted", "idle_gpus_in_multi", "idle_gpu_hours_in_multi"]
COUNTS = ["jobs", "jobs_no_metrics", "wait_n"]


def _source_cols(df) -> list[str]:
    """The frame's n_<source> columns (query.source_columns: registered sources first, then any other)."""
    return source_columns([c[2:] for c in df.columns if c.startswith("n_")])

NO_METRICS_NOTE = ("GPU utilization, used and wasted GPU-hours: no GPU metrics (Slurm accounting records "
                   "allocations only; these figures are unknown, not 0 %)")
SIMULATED_BANNER = ("WARNING: some or all GPU metrics in this report are SIMULATED (metric source 'simulated'), "
                    "not measured on real GPUs; utilization and waste figures are not real.")


@dataclass
class Report:
    kind: str
    window: Window
    keys: list[str]
    period: str | None
    scope: Scope
    table: Any  # pandas DataFrame: group columns + figure columns
    totals: dict[str, Any]
    columns: list[str]
    notes: list[str] = field(default_factory=list)
    definitions: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = "store"  # "store" (the hook's accounting store) | "sacct" (Slurm accounting, allocation only)
    columns_chosen: bool = False  # --columns: show exactly these, even wider than the terminal

    @property
    def empty(self) -> bool:
        return int(self.totals.get("jobs") or 0) == 0 and len(self.table) == 0

    @property
    def group_columns(self) -> list[str]:
        return [*self.keys, *(["period"] if self.period else [])]

    def select_columns(self, chosen: list[str]) -> None:
        """Show only `chosen` of the figure columns, in that order (sk report --columns)."""
        unknown = [c for c in chosen if c not in self.columns]
        if unknown or not chosen:
            from slurmkit.errors import InputError, Problem

            raise InputError(Problem(f"unknown column {unknown[0]!r} for the {self.kind} report" if unknown else
                                     "--columns names no column", key="--columns",
                                     hint=f"one or more of: {', '.join(self.columns)}"))
        self.definitions = definitions(chosen) + [d for d in self.definitions
                                                               if d not in definitions(self.columns)]
        self.columns = list(dict.fromkeys(chosen))
        self.columns_chosen = True

    def empty_message(self) -> str:
        who = "" if self.scope.everyone else f" for user {self.scope.user}"
        return f"no GPU jobs{who} between {self.window.fmt(self.window.since)} and " \
               f"{self.window.fmt(self.window.until)} ({self.window.tz_name})"


def derive(df):
    """Ratios and labels from the additive sums. Works on the grouped rows and on the one-row total alike."""
    import numpy as np

    df = df.copy()
    measured = df["gpu_hours_measured"].where(df["gpu_hours_measured"] > 0)
    # Figures that need GPU metrics are unknown (NaN, printed "-", JSON null) where nothing was measured: never 0.
    for col in NEED_METRICS:
        df[col] = df[col].astype(float).where(measured.notna())
    df["mean_util_pct"] = df["gpu_hours_used"] / measured * 100
    df["waste_pct"] = df["gpu_hours_wasted"] / measured * 100
    df["gpu_hours_unmeasured"] = (df["gpu_hours"] - df["gpu_hours_measured"]).clip(lower=0)
    df["mean_wait_h"] = df["wait_s_sum"] / df["wait_n"].where(df["wait_n"] > 0) / 3600
    if "wait_s_max" in df:
        df["max_wait_h"] = df["wait_s_max"].astype(float) / 3600
    total = df["gpu_hours"].sum()
    df["share_pct"] = df["gpu_hours"] / total * 100 if total > 0 else np.nan
    df["grade"] = [grading.grade(v) for v in df["mean_util_pct"]]
    # Which sources each row's numbers came from: one label per distinct combination, not per row (iterrows took
    # 10 s for a year of users x days).
    cols = _source_cols(df)
    names = [c[2:] for c in cols]
    present = df[cols].to_numpy(dtype=float) > 0 if cols else np.zeros((len(df), 0), dtype=bool)
    labels: dict[bytes, str] = {}
    df["sources"] = [labels.setdefault(row.tobytes(), ", ".join(n for n, p in zip(names, row, strict=True) if p)
                                       or "-") for row in present]
    return df


def _totals(df) -> dict[str, Any]:
    import pandas as pd

    additive, counts = [*ADDITIVE, *_source_cols(df)], [*COUNTS, *_source_cols(df)]
    sums = df[additive].sum() if len(df) else pd.Series(0, index=additive)
    one = pd.DataFrame([sums])
    one["wait_s_max"] = df["wait_s_max"].max() if len(df) else None
    one[counts] = one[counts].astype(int)
    row = derive(one).iloc[0].to_dict()
    row.update({c: int(row[c]) for c in counts})
    if row["idle_gpus_in_multi"] == row["idle_gpus_in_multi"]:  # not NaN
        row["idle_gpus_in_multi"] = int(row["idle_gpus_in_multi"])
    row["share_pct"] = 100.0 if row["gpu_hours"] > 0 else None
    return row


def source_counts(totals: dict[str, Any]) -> dict[str, int]:
    """GPU records with metrics per metric source, from a report's totals (every registered source)."""
    return {c[2:]: int(totals.get(c) or 0) for c in source_columns([k[2:] for k in totals if k.startswith("n_")])}


def simulated(totals: dict[str, Any]) -> bool:
    """Did any numbers come from a source that is not real (slurmkit/record.py METRIC_SOURCES)?"""
    return any(n for s, n in source_counts(totals).items() if s in BY_SOURCE and not BY_SOURCE[s].real)


def source_notes(totals: dict[str, Any]) -> list[str]:
    n = source_counts(totals)
    notes = []
    if simulated(totals):
        notes.append(SIMULATED_BANNER)
    used = [f"{s} ({n[s]} GPU records)" for s in n if n[s]]
    notes.append("metric sources: " + (", ".join(used) if used else "none (no GPU metrics in this window)"))
    return notes


def check_allocation_only(kind: str, sort: str | None) -> None:
    """Slurm accounting has no GPU utilization: refuse the reports that are made of it, saying what works."""
    if kind in ("efficiency", "idle") or (kind == "top" and sort not in (None, "gpu-hours")):
        what = f"sk report {kind}" + (f" --sort {sort}" if kind == "top" else "")
        raise InputError(Problem(f"{what} needs per-GPU utilization metrics; Slurm accounting has none",
                                 key="--from-sacct",
                                 hint="use `sk report usage --from-sacct` or `sk report top --from-sacct` "
                                      "(GPU-hours allocated), or read the slurmkit accounting store (--db)"))


def scope_note(scope: Scope, admin_group: str) -> list[str]:
    if scope.everyone:
        return []
    return [f"showing only your own jobs (user {scope.user}); members of group {admin_group!r} see all users"]


def build(kind: str, store: Store, window: Window, keys: list[str], period: str | None, scope: Scope, *,
          admin_group: str = "slurmkit-admin", sort: str | None = None, limit: int | None = None,
          idle_pct: float = IDLE_UTIL_PCT, source: str = "store") -> Report:
    """usage | efficiency | top | idle, over `window`, grouped by `keys` (+ `period`).

    source="sacct": `store` holds allocation records from Slurm accounting (report/sacct_source.py); only usage
    and top by GPU-hours make sense there, and the report shows the allocation figures and says why.
    """
    if source == "sacct":
        check_allocation_only(kind, sort)
    if not keys and kind in ("efficiency", "top"):
        keys = ["user"]
    df = derive(run_aggregate(store, window, keys, period, scope, idle_pct))
    totals = _totals(df)
    columns = list(COLUMNS["usage" if kind == "idle" else kind])
    if kind == "efficiency":
        df = df.sort_values(["gpu_hours_wasted", *keys], ascending=[False, *[True] * len(keys)])
    if kind == "top":
        by = {"waste": "gpu_hours_wasted", "gpu-hours": "gpu_hours", "used": "gpu_hours_used"}[sort or "gpu-hours"]
        df = df.sort_values([by, *keys], ascending=[False, *[True] * len(keys)]).head(limit or 10)
    if source == "sacct":
        from slurmkit.report import sacct_source

        columns = list(COLUMNS["allocation"])
        sources = [sacct_source.NOTE, NO_METRICS_NOTE]
    else:
        sources = source_notes(totals)
    notes = [f"window: {window.describe()}", *scope_note(scope, admin_group), *sources]
    report = Report(kind, window, keys, period, scope, df.reset_index(drop=True), totals, columns, notes,
                    definitions(columns), source=source)
    if kind in ("efficiency", "top") and source != "sacct":
        report.definitions.append(grading.legend())
    if kind == "idle":
        report.columns = ["jobs", "gpu_hours", "idle_gpus_in_multi", "idle_gpu_hours_in_multi",
                          "gpu_hours_wasted", "mean_util_pct"]
        report.definitions = definitions(report.columns)
        report.extra["jobs"] = run_idle_jobs(store, window, scope, limit or 20, idle_pct)
    return report
