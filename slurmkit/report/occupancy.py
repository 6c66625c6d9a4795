"""How full the cluster was: GPU-hours allocated against the GPU-hours it had, per period.

The GPUs it had come from Slurm's own records (slurmkit/slurm/events.py: the cluster's registered TRES, less
the time nodes were down, drained or powered down), the allocations from the accounting store (or sacct with
--from-sacct). The figures are those of `sreport cluster utilization -T gres/gpu`, and where a definition
differs the report says how (checked against Slurm's own records on the devcluster:
tests/integration/test_occupancy_on_devcluster.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from slurmkit.errors import BackendError, InputError, Problem
from slurmkit.report.build import Report, build
from slurmkit.report.figures import COLUMNS, definitions
from slurmkit.report.query import Scope
from slurmkit.report.window import Window, periods
from slurmkit.slurm import events as slurm_events
from slurmkit.store.db import Store

SREPORT_NOTE = ("compared with `sreport cluster utilization -T gres/gpu`: capacity GPU-h = Reported, down GPU-h = "
                "Down, planned down GPU-h = PLND Down, GPU-h = Allocated; sreport also sets reserved idle time "
                "apart (Reserved), which is available here, and sums whole hours only (up to its last hourly "
                "rollup), where this report counts to the second and up to now")


def build_occupancy(store: Store, window: Window, period: str | None, scope: Scope, *, admin_group: str,
                    source: str = "store", now: int | None = None,
                    load_events: Callable[..., list[slurm_events.Event]] = slurm_events.load) -> Report:
    """Occupancy per period (or for the whole window) of every cluster Slurm accounting reports on."""
    if not scope.everyone:
        raise InputError(Problem("the occupancy report is about the whole cluster, all users' jobs",
                                 key="sk report occupancy",
                                 hint=f"members of group {admin_group!r} (or root) can run it; `sk report usage` "
                                      "shows your own GPU-hours"))
    now = int(time.time()) if now is None else now
    end = min(window.until, now)
    evs = load_events(window.since, max(end, window.since)) if end > window.since else []
    clusters = sorted({e.cluster for e in evs if e.kind == "cluster"})
    if end > window.since and not clusters:
        raise BackendError("Slurm accounting has no record of the cluster's size in this window (sacctmgr show "
                           "event Event=Cluster lists nothing)",
                           hint="is slurmctld registered with slurmdbd (sacctmgr show cluster)? Slurm keeps "
                                "events only from the cluster's first registration on")
    if clusters and not any(e.gpus for e in evs if e.kind == "cluster"):
        raise BackendError("Slurm accounting records no GPUs for this cluster (its TRES lack gres/gpu)",
                           hint="add gres/gpu to AccountingStorageTRES in slurm.conf; Slurm counts GPUs from then on")

    alloc = build("usage", store, window, ["cluster"], period, scope, admin_group=admin_group, source=source).table
    buckets = periods(window, period) if period else [("", window.since, window.until)]
    rows = []
    for cluster in clusters:
        mine = [e for e in evs if e.cluster == cluster]
        for label, ps, pe in buckets:
            hi = min(pe, end)
            secs = {k: sum(e.gpus * e.seconds_in(ps, hi) for e in mine if e.kind == k)
                    for k in ("cluster", "down", "planned-down")}
            sel = alloc["cluster"] == cluster
            if period:
                sel &= alloc["period"] == label
            rows.append({"cluster": cluster, **({"period": label} if period else {}),
                         "capacity_gpu_hours": secs["cluster"] / 3600, "down_gpu_hours": secs["down"] / 3600,
                         "planned_down_gpu_hours": secs["planned-down"] / 3600,
                         "gpu_hours": float(alloc.loc[sel, "gpu_hours"].sum())})
    table = derive(rows, period)
    totals = derive([{k: sum(r[k] for r in rows) for k in ADDITIVE}], None).iloc[0].to_dict() if rows else {}
    keys = ["cluster"] if len(clusters) > 1 else []
    if not keys:
        table = table.drop(columns=["cluster"], errors="ignore")
    others = sorted(set(alloc["cluster"]) - set(clusters)) if len(alloc) else []
    notes = [f"window: {window.describe()}",
             f"cluster{'s' if len(clusters) > 1 else ''}: {', '.join(clusters) or '(none in this window)'}; "
             "capacity from Slurm's event records (sacctmgr show event)"]
    if window.until > now:
        notes.append(f"the window ends after now: capacity is counted up to now ({window.fmt(now)})")
    if others:
        notes.append(f"left out: jobs of {', '.join(others)}, a cluster this Slurm accounting has no events for")
    notes += [("allocations from Slurm accounting (sacct)" if source == "sacct" else
               "allocations from the slurmkit accounting store"), SREPORT_NOTE]
    columns = list(COLUMNS["occupancy"])
    return Report("occupancy", window, keys, period, scope, table.reset_index(drop=True), totals, columns, notes,
                  definitions(columns), source=source)


ADDITIVE = ("capacity_gpu_hours", "down_gpu_hours", "planned_down_gpu_hours", "gpu_hours")


def derive(rows: list[dict[str, Any]], period: str | None):
    """The table of `rows` (the additive GPU-hours), with available GPU-h and occupancy % derived from them."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=["cluster", *(["period"] if period else []), *ADDITIVE])
    df["available_gpu_hours"] = (df["capacity_gpu_hours"] - df["down_gpu_hours"]
                                 - df["planned_down_gpu_hours"]).clip(lower=0)
    df["occupancy_pct"] = df["gpu_hours"] / df["available_gpu_hours"].where(df["available_gpu_hours"] > 0) * 100
    return df
