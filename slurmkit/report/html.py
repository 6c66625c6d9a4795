"""The HTML report: one self-contained page (inline CSS and SVG plots, no scripts, no network) built from the
same SQL aggregates as every other format, so the page and `--format json` never disagree.

The header names the clusters, the window and its time zone, whose jobs, the metric sources and the store's
freshness. Then summary figures and the plots of the report asked for: a usage page (usage, top) shows where the
GPU-hours went (over time by account, by job size, queue waits, top users, the utilization histogram); an
efficiency page (efficiency, idle) shows how well they were used (utilization per partition, grades, waste per
account, user and partition, idle GPUs by node and day, GPU memory). Each plot carries its definition and the
numbers behind it. Figures that need GPU metrics say "no GPU metrics" when there are none (e.g. `--from-sacct`),
never 0 %. Then the requested table (largest first, totals on top, long ones folded), the notes and definitions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.report import grading, plotdata
from slurmkit.report.build import SIMULATED_BANNER, Report, build, source_counts
from slurmkit.report.formats import _rows, title
from slurmkit.report.query import util_histogram
from slurmkit.store.db import Store

NO_METRICS = "no GPU metrics"
NO_JOBS = "no GPU-hours in this window"
TOP_N = 10
TOP_ACCOUNTS = 8  # accounts drawn by name in "GPU-hours over time"; the rest are "other" (9 colours, none reused)
WASTE_ACCOUNTS = 15
HEATMAP_NODES = 40
TABLE_ROWS = 25  # rows shown before the rest of a table folds into <details>
DAY = 86400


@dataclass
class Card:
    label: str
    value: str | None
    missing: str = NO_METRICS


@dataclass
class Plot:
    name: str
    title: str
    svg: Any = None  # markupsafe.Markup of an <svg> element, or None when there is nothing to plot
    missing: str = NO_METRICS
    caption: str = ""  # what the plot shows, in words: its definition
    series: list[tuple[str, str]] = field(default_factory=list)  # (label, colour) of each series drawn
    data: dict[str, Any] | None = None  # {"headers": [...], "rows": [[...]]}: the numbers behind the plot


def overview_period(report: Report) -> str:
    """The bucket for "GPU-hours over time": the report's own --by period, else one that gives 7-60 bars."""
    if report.period:
        return report.period
    days = report.window.seconds / DAY
    return "day" if days <= 62 else "week" if days <= 366 else "month"


def _num(value: Any, fmt: str = "{:,.1f}") -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return fmt.format(value)


def _cards(t: dict[str, Any]) -> list[Card]:
    measured = (t.get("gpu_hours_measured") or 0) > 0
    util = _num(t.get("mean_util_pct"), "{:.1f} %")
    grade = grading.grade(t.get("mean_util_pct"))
    return [
        Card("GPU jobs", _num(t.get("jobs"), "{:,.0f}")),
        Card("GPU-hours allocated", _num(t.get("gpu_hours"))),
        Card("GPU-hours used (utilization-weighted)", _num(t.get("gpu_hours_used")) if measured else None),
        Card("mean GPU utilization" + (f" (grade {grade})" if util else ""), util),
        Card("GPU-hours wasted (allocated, idle)", _num(t.get("gpu_hours_wasted")) if measured else None),
        Card(f"idle GPUs in multi-GPU jobs (< {IDLE_UTIL_PCT:g} %)",
             _num(t.get("idle_gpus_in_multi"), "{:,.0f}") if measured else None),
        Card("jobs without GPU metrics", _num(t.get("jobs_no_metrics"), "{:,.0f}")),
        Card("GPU-hours without metrics", _num(t.get("gpu_hours_unmeasured"))),
        Card("mean queue wait", _num(t.get("mean_wait_h"), "{:,.2f} h"), "-"),
    ]


def _occupancy_cards(t: dict[str, Any]) -> list[Card]:
    return [
        Card("GPU-hours the cluster had (capacity)", _num(t.get("capacity_gpu_hours")), "-"),
        Card("GPU-hours down or drained", _num(t.get("down_gpu_hours")), "-"),
        Card("GPU-hours planned down (future, powered down)", _num(t.get("planned_down_gpu_hours")), "-"),
        Card("GPU-hours available", _num(t.get("available_gpu_hours")), "-"),
        Card("GPU-hours allocated", _num(t.get("gpu_hours")), "-"),
        Card("occupancy (allocated / available)", _num(t.get("occupancy_pct"), "{:.1f} %"), "no GPUs available"),
    ]


def _top(df, column: str, n: int = TOP_N):
    return df[df[column] > 0].sort_values([column, df.columns[0]], ascending=[False, True]).head(n)


def _markup(svg: str):
    from markupsafe import Markup

    return Markup(svg)  # our own matplotlib output; every label in it was escaped by matplotlib's SVG writer


def _data(headers: list[str], rows: list[list[Any]]) -> dict[str, Any]:
    return {"headers": headers, "rows": [[str(c) for c in r] for r in rows]}


@dataclass
class _Inputs:
    """The report's store queries, each run once however many plots read it."""

    report: Report
    store: Store

    def _build(self, keys: list[str], period: str | None = None):
        r = self.report
        return build("usage", self.store, r.window, keys, period, r.scope).table

    @cached_property
    def by_user(self):
        return self._build(["user"])

    @cached_property
    def by_account(self):
        return self._build(["account"])

    @cached_property
    def by_partition(self):
        return self._build(["partition"])

    @cached_property
    def runs(self):
        return plotdata.per_run_groups(self.store, self.report.window, self.report.scope)

    @property
    def measured(self) -> bool:
        return (self.report.totals.get("gpu_hours_measured") or 0) > 0


def _gpu_hours_over_time(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    period = overview_period(d.report)
    by_acct = d._build(["account"], period)
    t = f"GPU-hours allocated per {period}, top {TOP_ACCOUNTS} accounts"
    p = Plot("gpu-hours-over-time", t, missing=NO_JOBS,
             caption=f"GPUs x hours inside each {period} ({d.report.window.tz_name} calendar), stacked by account: "
                     f"the {TOP_ACCOUNTS} accounts with the most GPU-hours in the window by name, all others "
                     "summed as \"other\".")
    if not len(by_acct) or by_acct["gpu_hours"].sum() <= 0:
        return p
    pivot = by_acct.pivot_table(index="period", columns="account", values="gpu_hours", aggfunc="sum",
                                fill_value=0.0).sort_index()
    order = pivot.sum().sort_values(ascending=False, kind="stable").index
    top, rest = list(order[:TOP_ACCOUNTS]), list(order[TOP_ACCOUNTS:])
    series = {a: list(pivot[a]) for a in top}
    colors = plots.palette(len(top))
    if rest:
        series["other"] = list(pivot[rest].sum(axis=1))
        colors.append(plots.OTHER_COLOR)
    p.series = list(zip(series, colors, strict=True))
    p.svg = _markup(plots.stacked_bars(list(pivot.index), series, title=t, ylabel="GPU-hours", name=p.name,
                                       colors=colors))
    totals = {a: sum(v) for a, v in series.items()}
    p.data = _data(["account", "GPU-hours"], [[a, f"{v:,.1f}"] for a, v in totals.items()])
    return p


def _utilization_histogram(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    r = d.report
    hist = util_histogram(d.store, r.window, r.scope)
    t = "Measured GPU-hours by GPU utilization"
    p = Plot("utilization-histogram", t, caption="GPU-hours of the GPUs with metrics, by the GPU's mean "
             "utilization over its job run.")
    if hist["gpu_hours"].sum() > 0:
        p.svg = _markup(plots.histogram(list(hist["label"]), list(hist["gpu_hours"]), title=t, ylabel="GPU-hours",
                                        name=p.name))
    return p


def _top_users_gpu_hours(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    top = _top(d.by_user, "gpu_hours")
    t = f"Top {TOP_N} users by GPU-hours allocated"
    p = Plot("top-users-gpu-hours", t, missing=NO_JOBS)
    if len(top):
        measured = d.by_user["gpu_hours_measured"].sum() > 0
        p.svg = _markup(plots.hbars(list(top["user"]), list(top["gpu_hours"]), title=t,
                                    xlabel="GPU-hours allocated", name=p.name,
                                    overlay=list(top["gpu_hours_used"]) if measured else None,
                                    overlay_label="used (utilization-weighted)"))
    return p


def _job_sizes(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    runs = d.runs
    t = "GPU-hours allocated by GPUs per job"
    p = Plot("job-sizes", t, missing=NO_JOBS, caption="job runs by the GPUs they were allocated (all nodes): "
             "the bars are their GPU-hours inside the window, the labels the number of job runs.")
    if not len(runs) or runs["gpu_hours"].sum() <= 0:
        return p
    sizes = runs.groupby("size")[["jobs", "gpu_hours"]].sum().reindex([s for s, _ in plotdata.SIZES], fill_value=0)
    p.svg = _markup(plots.bars(list(sizes.index), list(sizes["gpu_hours"]), title=t, ylabel="GPU-hours",
                               xlabel="GPUs per job", name=p.name,
                               notes=[f"{int(n):,} jobs" for n in sizes["jobs"]]))
    p.data = _data(["GPUs per job", "job runs", "GPU-hours"],
                   [[s, f"{int(r.jobs):,}", f"{r.gpu_hours:,.1f}"] for s, r in sizes.iterrows()])
    return p


def _hours(seconds: float) -> float:
    return float(seconds) / 3600


def _queue_wait(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    r = d.report
    w = plotdata.wait_percentiles(d.store, r.window, r.scope)
    t = "Queue wait by partition: median and 90th percentile"
    p = Plot("queue-wait", t, missing="no queue waits (no submit times) in this window",
             caption="wait = start - submit of each job run in the window (a requeued run waits from its own "
                     "submit time); p50 and p90 are nearest-rank percentiles per partition, in hours.")
    if not len(w):
        return p
    p.svg = _markup(plots.grouped_bars(list(w["partition"]), {"p50": [_hours(v) for v in w["p50"]],
                                                               "p90": [_hours(v) for v in w["p90"]]},
                                       title=t, ylabel="hours", name=p.name, fmt="{:.2f}"))
    p.data = _data(["partition", "job runs", "p50 wait h", "p90 wait h"],
                   [[x.partition, f"{int(x.n):,}", f"{_hours(x.p50):.2f}", f"{_hours(x.p90):.2f}"]
                    for x in w.itertuples()])
    return p


def _utilization_by_partition(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    r = d.report
    u = plotdata.util_percentiles(d.store, r.window, r.scope)
    t = "Mean GPU utilization of job runs, by partition"
    p = Plot("utilization-by-partition", t,
             caption="one value per job run with GPU metrics: the mean utilization of its measured GPUs (runs "
                     "without metrics are left out, not counted as 0 %); box 25th-75th percentile, line the "
                     "median, whiskers 10th and 90th (nearest rank); n = job runs.")
    if not len(u):
        return p
    stats = u[[f"p{q}" for q in plotdata.QUANTILES]].astype(float).to_dict("records")
    p.svg = _markup(plots.boxes(list(u["partition"]), stats, title=t, ylabel="mean GPU utilization %",
                                name=p.name, notes=[f"n={int(n):,}" for n in u["n"]]))
    p.data = _data(["partition", "job runs", *(f"p{q} %" for q in plotdata.QUANTILES)],
                   [[x["partition"], f"{int(x['n']):,}", *(f"{float(x[f'p{q}']):.1f}" for q in plotdata.QUANTILES)]
                    for x in u.to_dict("records")])
    return p


GRADE_COLORS = {"A": "#1a9850", "B": "#91cf60", "C": "#fee08b", "D": "#fc8d59", "F": "#d73027",
                grading.NO_METRICS: "#bdbdbd"}


def _grades(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    t = "GPU-hours allocated by efficiency grade of the job run"
    p = Plot("grades", t, caption="each job run graded by the mean utilization of its measured GPUs ("
             + grading.legend().split(": ", 1)[1] + "); bars: its GPU-hours inside the window, labels: job runs.")
    runs = d.runs
    if not len(runs) or not (runs["grade"] != grading.NO_METRICS).any():
        return p
    order = [*(g for g, _ in grading.THRESHOLDS), grading.NO_METRICS]
    by = runs.groupby("grade")[["jobs", "gpu_hours"]].sum().reindex(order, fill_value=0)
    p.svg = _markup(plots.bars(list(by.index), list(by["gpu_hours"]), title=t, ylabel="GPU-hours", xlabel="grade",
                               name=p.name, notes=[f"{int(n):,} jobs" for n in by["jobs"]],
                               colors=[GRADE_COLORS[g] for g in by.index]))
    p.data = _data(["grade", "job runs", "GPU-hours"],
                   [[g, f"{int(x.jobs):,}", f"{x.gpu_hours:,.1f}"] for g, x in by.iterrows()])
    return p


def _waste_by_account(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    t = f"Waste % of the {WASTE_ACCOUNTS} accounts with the most measured GPU-hours"
    p = Plot("waste-by-account", t, caption="waste % = wasted GPU-hours (idle_fraction x hours of each measured "
             "GPU) / measured GPU-hours x 100, per account.")
    acct = d.by_account
    acct = acct[acct["gpu_hours_measured"] > 0]
    if not len(acct):
        return p
    top = acct.sort_values(["gpu_hours_measured", "account"], ascending=[False, True]).head(WASTE_ACCOUNTS)
    top = top.sort_values(["waste_pct", "account"], ascending=[False, True])
    p.svg = _markup(plots.hbars(list(top["account"]), list(top["waste_pct"]), title=t, xlabel="waste %",
                                name=p.name, color=plots.COLORS[3]))
    p.data = _data(["account", "measured GPU-h", "wasted GPU-h", "waste %"],
                   [[x.account, f"{x.gpu_hours_measured:,.1f}", f"{x.gpu_hours_wasted:,.1f}", f"{x.waste_pct:.1f}"]
                    for x in top.itertuples()])
    return p


def _top_users_waste(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    top = _top(d.by_user, "gpu_hours_wasted")
    t = f"Top {TOP_N} users by wasted GPU-hours"
    p = Plot("top-users-waste", t)
    if len(top):
        p.svg = _markup(plots.hbars(list(top["user"]), list(top["gpu_hours_wasted"]), title=t,
                                    xlabel="GPU-hours wasted (allocated, idle)", name=p.name,
                                    color=plots.COLORS[3]))
    return p


def _waste_by_partition(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    part = _top(d.by_partition, "gpu_hours_wasted")
    t = "Wasted GPU-hours by partition"
    p = Plot("waste-by-partition", t)
    if len(part):
        p.svg = _markup(plots.hbars(list(part["partition"]), list(part["gpu_hours_wasted"]), title=t,
                                    xlabel="GPU-hours wasted (allocated, idle)", name=p.name,
                                    color=plots.COLORS[1]))
    return p


def _idle_heatmap(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    r = d.report
    cells = plotdata.idle_by_node_day(d.store, r.window, r.scope)
    days = cells.attrs["days"]
    nodes = cells.groupby("node")["idle_gpu_hours"].sum().sort_values(ascending=False, kind="stable") \
        if len(cells) else None
    shown = f"the {HEATMAP_NODES} nodes with the most idle GPU-hours" if nodes is not None and \
        len(nodes) > HEATMAP_NODES else "every node with GPU metrics"
    t = "Idle GPU-hours by node and day"
    p = Plot("idle-heatmap", t, caption=(
        f"idle GPU-hours of a node on a day = the sum, over the GPUs with metrics of the job runs on that node, "
        f"of the GPU's idle_fraction (share of samples below the idle threshold) x the run's hours inside that "
        f"day; days in {r.window.tz_name}; {shown}; grey: no GPU with metrics on that node that day (unknown, "
        "not 0)."))
    if nodes is None or not len(nodes):
        return p
    keep = sorted(nodes.index[:HEATMAP_NODES])
    grid = cells.pivot_table(index="node", columns="day", values="idle_gpu_hours", aggfunc="sum") \
        .reindex(index=keep, columns=days)
    p.svg = _markup(plots.heatmap(keep, days, grid.to_numpy(), title=t, label="idle GPU-hours", name=p.name))
    worst = cells.sort_values(["idle_gpu_hours", "node", "day"], ascending=[False, True, True]).head(TOP_N)
    p.data = _data(["node", "day", "idle GPU-h", "measured GPU-h"],
                   [[x.node, x.day, f"{x.idle_gpu_hours:.2f}", f"{x.gpu_hours:.2f}"] for x in worst.itertuples()])
    return p


def _gpu_memory(d: _Inputs) -> Plot:
    from slurmkit.report import plots

    r = d.report
    hist = plotdata.memory_histogram(d.store, r.window, r.scope)
    unknown = hist.attrs["gpu_hours_unknown"]
    t = "GPU-hours by peak GPU memory used (% of the GPU's memory)"
    p = Plot("gpu-memory", t, missing="no GPU memory figures",
             caption="per GPU of a job run: its peak memory used (mem_max_mib) / its memory (mem_total_mib), "
                     "weighted by the run's hours inside the window"
                     + (f"; {unknown:,.1f} GPU-hours without memory figures are left out" if unknown else "") + ".")
    if hist["gpu_hours"].sum() > 0:
        p.svg = _markup(plots.histogram(list(hist["label"]), list(hist["gpu_hours"]), title=t, ylabel="GPU-hours",
                                        name=p.name))
        p.data = _data(["peak memory", "GPUs", "GPU-hours"],
                       [[x.label, f"{int(x.gpus):,}", f"{x.gpu_hours:,.1f}"] for x in hist.itertuples()])
    return p


def _occupancy_over_time(d: _Inputs) -> Plot:
    """Allocated GPU-hours per period against what the cluster had and what was available."""
    from slurmkit.report import plots

    r = d.report
    t = f"GPU-hours allocated per {r.period or 'window'} against the cluster's capacity"
    p = Plot("occupancy-over-time", t, missing="one figure for the whole window: --by day, week or month "
             "draws the trend",
             caption="bars: GPU-hours allocated; lines: the GPU-hours the cluster had (its registered GPUs x "
                     "hours) and those available (less nodes down, drained or planned down), from Slurm's "
                     "event records.")
    if not r.period or not len(r.table):
        return p
    from slurmkit.report.occupancy import ADDITIVE, derive

    per = derive(r.table.groupby("period", sort=True)[list(ADDITIVE)].sum().reset_index().to_dict("records"),
                 r.period)  # summed over the clusters, then derived as the report derives its rows
    labels = [str(x) for x in per["period"]]
    p.series = [("allocated", plots.COLORS[0]), ("capacity", plots.COLORS[3]), ("available", plots.COLORS[4])]
    p.svg = _markup(plots.bars_against_lines(labels, list(per["gpu_hours"]),
                                             {"capacity": list(per["capacity_gpu_hours"]),
                                              "available": list(per["available_gpu_hours"])},
                                             title=t, ylabel="GPU-hours", name=p.name, bar_label="allocated"))
    p.data = _data([r.period, "allocated GPU-h", "capacity GPU-h", "available GPU-h", "occupancy %"],
                   [[lab, f"{x.gpu_hours:,.1f}", f"{x.capacity_gpu_hours:,.1f}", f"{x.available_gpu_hours:,.1f}",
                     "-" if x.occupancy_pct != x.occupancy_pct else f"{x.occupancy_pct:.1f}"]
                    for lab, x in zip(labels, per.itertuples(), strict=True)])
    return p


PlotMaker = Callable[[_Inputs], Plot]
USAGE_PLOTS: tuple[PlotMaker, ...] = (_gpu_hours_over_time, _job_sizes, _queue_wait, _top_users_gpu_hours,
                                      _utilization_histogram)
EFFICIENCY_PLOTS: tuple[PlotMaker, ...] = (_utilization_by_partition, _grades, _waste_by_account, _top_users_waste,
                                           _waste_by_partition, _idle_heatmap, _gpu_memory)
# Which page a report gets: usage and top say where GPU-hours went; efficiency and idle how well they were used.
OCCUPANCY_PLOTS: tuple[PlotMaker, ...] = (_occupancy_over_time,)
PAGE_PLOTS = {"usage": USAGE_PLOTS, "top": USAGE_PLOTS, "efficiency": EFFICIENCY_PLOTS, "idle": EFFICIENCY_PLOTS,
              "occupancy": OCCUPANCY_PLOTS}


def _plots(report: Report, store: Store) -> list[Plot]:
    inputs = _Inputs(report, store)
    return [make(inputs) for make in PAGE_PLOTS.get(report.kind, USAGE_PLOTS)]


def _sorted(report: Report) -> tuple[Report, str]:
    """The report with its table sorted for reading, and how, in words. Usage and idle tables: largest
    GPU-hours first (with a period: the groups by their total, each group's periods in time order; by period
    alone: time order). Efficiency (most wasted first) and top (its --sort) keep the order they were built in."""
    df, keys = report.table, report.keys
    if report.kind == "efficiency":
        return report, "most wasted GPU-hours first"
    if report.kind == "top":
        return report, "in the order of --sort, largest first"
    if report.kind == "occupancy":
        return report, "in time order" if report.period else ""
    if not keys or not len(df):
        return report, "in time order" if report.period else ""
    df = df.assign(_total=df.groupby(keys)["gpu_hours"].transform("sum"))
    df = df.sort_values(["_total", *keys, *(["period"] if report.period else [])],
                        ascending=[False, *[True] * (len(keys) + bool(report.period))], kind="stable")
    how = "largest GPU-hours first" + (f" (per {', '.join(keys)}, over all periods)" if report.period else "")
    return dataclasses.replace(report, table=df.drop(columns="_total").reset_index(drop=True)), how


def _split(name: str, title_: str, headers: list[str], rows: list[list[str]], total: list[str] | None,
           how: str = "") -> dict[str, Any]:
    return {"name": name, "title": title_, "headers": headers, "total": total, "rows": rows[:TABLE_ROWS],
            "more": rows[TABLE_ROWS:], "how": how}


def _tables(report: Report) -> list[dict[str, Any]]:
    shown, how = _sorted(report)
    headers, rows = _rows(shown)
    total = rows.pop() if len(shown.table) > 1 else None  # formats._rows appends the TOTAL row last
    tables = [_split(report.kind, title(report), headers, rows, total, how)]
    jobs = report.extra.get("jobs")
    if jobs is not None and len(jobs):
        tables.append(_split(
            "idle-jobs", "Multi-GPU jobs with idle GPUs",
            ["job", "user", "account", "partition", "GPUs", "idle GPUs", "hours", "idle GPU-h", "mean util %"],
            [[str(r["job_id"]) + (f" (run {r['run']})" if r["run"] else ""), r["user"], r["account"],
              r["partition"], str(r["gpus"]), f"{r['idle_gpus']} of {r['gpus_measured']}",
              f"{r['hours']:.2f}", f"{r['idle_gpu_hours']:.2f}", f"{r['mean_util_pct']:.1f}"]
             for _, r in jobs.iterrows()], None, "most idle GPU-hours first"))
    return tables


def _sources(report: Report) -> str:
    if report.kind == "occupancy":
        return ("capacity: Slurm's event records (sacctmgr show event); allocations: "
                + ("Slurm accounting (sacct)" if report.source == "sacct" else "the slurmkit accounting store"))
    if report.source == "sacct":
        return "Slurm accounting (allocations only: no GPU metrics)"
    n = source_counts(report.totals)
    used = [f"{s} ({n[s]:,} GPU records)" for s in n if n[s]]
    return ", ".join(used) if used else "none (no GPU metrics in this window)"


def _freshness(report: Report) -> str | None:
    f = report.extra.get("freshness")
    if not isinstance(f, dict):
        return None
    from slurmkit.report import freshness

    try:
        return "; ".join(freshness.notes(freshness.Freshness(**f), report.window))
    except TypeError:  # a dict of another shape (an older or newer caller): show what it says
        return ", ".join(f"{k}: {v}" for k, v in f.items())


def _header(report: Report, store: Store) -> list[tuple[str, str]]:
    """(label, text) lines under the title: what the page covers and where its numbers come from."""
    w = report.window
    found = [] if report.source == "sacct" and report.empty else plotdata.clusters(store, w, report.scope)
    lines = [("cluster" if len(found) <= 1 else "clusters", ", ".join(found) or "none (no GPU jobs in the window)"),
             ("window", f"{w.fmt(w.since)} to {w.fmt(w.until)}"), ("time zone", w.tz_name),
             ("jobs", "every user's" if report.scope.everyone else f"only the jobs of user {report.scope.user}"),
             ("metric sources", _sources(report))]
    fresh = _freshness(report)
    if fresh:
        lines.append(("store freshness", fresh))
    return lines


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("slurmkit.report", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)


def page(report: Report, store: Store, *, now: datetime | None = None) -> str:
    """The whole HTML document for `report` (queries `store` again for the header and the plots)."""
    from slurmkit import __version__

    totals = report.totals
    banners = [n for n in report.notes if n == SIMULATED_BANNER]
    occupancy = report.kind == "occupancy"
    if not report.empty and not occupancy and not (totals.get("gpu_hours_measured") or 0) > 0:
        banners.append("No GPU metrics in this window: utilization, used and wasted GPU-hours are unknown "
                       "(shown as \"no GPU metrics\", never as 0 %); allocation figures are exact.")
    scope = "" if report.scope.everyone else f"only the jobs of user {report.scope.user}"
    empty = report.empty_message() if report.empty else ""
    context = {
        "title": f"slurmkit: {title(report)}" if not empty else "slurmkit GPU report: no jobs",
        "window": report.window.describe(), "scope": scope, "banners": banners, "empty": empty,
        "header": _header(report, store),
        "page": "occupancy" if occupancy else "efficiency" if PAGE_PLOTS.get(report.kind) is EFFICIENCY_PLOTS
        else "usage",
        "cards": [] if empty else _occupancy_cards(totals) if occupancy else _cards(totals),
        "plots": [] if empty else _plots(report, store),
        "tables": [] if empty else _tables(report),
        "notes": [n for n in report.notes if n != SIMULATED_BANNER],
        "definitions": [*report.definitions, *([] if occupancy or any(d.startswith("grades")
                                                                      for d in report.definitions)
                                                 else [grading.legend()])],
        "version": __version__,
        "generated": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return _environment().get_template("page.html.j2").render(**context)
