"""The HTML report: one self-contained page (inline CSS and SVG plots, no scripts, no network) built from the
same SQL aggregates as every other format, so the page and `--format json` never disagree.

Whatever report was asked for (usage, efficiency, top, idle), the page shows the same overview of the window:
summary figures, GPU-hours over time stacked by account, the utilization histogram, top users by GPU-hours and
by waste, waste by partition; then the requested table, the notes and the definitions. Figures that need GPU
metrics say "no GPU metrics" when there are none (e.g. `--from-sacct`), never 0 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.report import grading
from slurmkit.report.build import SIMULATED_BANNER, Report, build
from slurmkit.report.formats import _rows, title
from slurmkit.report.query import util_histogram
from slurmkit.store.db import Store

NO_METRICS = "no GPU metrics"
TOP_N = 10
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


def _top(df, column: str):
    return df[df[column] > 0].sort_values([column, df.columns[0]], ascending=[False, True]).head(TOP_N)


def _plots(report: Report, store: Store) -> list[Plot]:
    from markupsafe import Markup

    from slurmkit.report import plots

    w, scope = report.window, report.scope
    period = overview_period(report)
    out: list[Plot] = []

    by_acct = build("usage", store, w, ["account"], period, scope).table
    t = f"GPU-hours allocated per {period}, stacked by account"
    p = Plot("gpu-hours-over-time", t, missing="no GPU-hours in this window")
    if len(by_acct):
        pivot = by_acct.pivot_table(index="period", columns="account", values="gpu_hours", aggfunc="sum",
                                    fill_value=0.0).sort_index()
        order = pivot.sum().sort_values(ascending=False).index
        p.svg = Markup(plots.stacked_bars(list(pivot.index), {a: list(pivot[a]) for a in order}, title=t,
                                          ylabel="GPU-hours", name=p.name))
    out.append(p)

    hist = util_histogram(store, w, scope)
    t = "Measured GPU-hours by GPU utilization"
    p = Plot("utilization-histogram", t)
    if hist["gpu_hours"].sum() > 0:
        p.svg = Markup(plots.histogram(list(hist["label"]), list(hist["gpu_hours"]), title=t,
                                       ylabel="GPU-hours", name=p.name))
    out.append(p)

    by_user = build("usage", store, w, ["user"], None, scope).table
    top = _top(by_user, "gpu_hours")
    t = f"Top {TOP_N} users by GPU-hours allocated"
    p = Plot("top-users-gpu-hours", t, missing="no GPU-hours in this window")
    if len(top):
        measured = by_user["gpu_hours_measured"].sum() > 0
        p.svg = Markup(plots.hbars(list(top["user"]), list(top["gpu_hours"]), title=t, xlabel="GPU-hours allocated",
                                   name=p.name, overlay=list(top["gpu_hours_used"]) if measured else None,
                                   overlay_label="used (utilization-weighted)"))
    out.append(p)

    top = _top(by_user, "gpu_hours_wasted")
    t = f"Top {TOP_N} users by wasted GPU-hours"
    p = Plot("top-users-waste", t)
    if len(top):
        p.svg = Markup(plots.hbars(list(top["user"]), list(top["gpu_hours_wasted"]), title=t,
                                   xlabel="GPU-hours wasted (allocated, idle)", name=p.name,
                                   color=plots.COLORS[3]))
    out.append(p)

    by_part = build("usage", store, w, ["partition"], None, scope).table
    part = _top(by_part, "gpu_hours_wasted")
    t = "Wasted GPU-hours by partition"
    p = Plot("waste-by-partition", t)
    if len(part):
        p.svg = Markup(plots.hbars(list(part["partition"]), list(part["gpu_hours_wasted"]), title=t,
                                   xlabel="GPU-hours wasted (allocated, idle)", name=p.name,
                                   color=plots.COLORS[1]))
    out.append(p)
    return out


def _tables(report: Report) -> list[dict[str, Any]]:
    headers, rows = _rows(report)
    tables = [{"name": report.kind, "title": title(report), "headers": headers, "rows": rows}]
    jobs = report.extra.get("jobs")
    if jobs is not None and len(jobs):
        tables.append({
            "name": "idle-jobs", "title": "Multi-GPU jobs with idle GPUs",
            "headers": ["job", "user", "account", "partition", "GPUs", "idle GPUs", "hours", "idle GPU-h",
                        "mean util %"],
            "rows": [[str(r["job_id"]) + (f" (run {r['run']})" if r["run"] else ""), r["user"], r["account"],
                      r["partition"], str(r["gpus"]), f"{r['idle_gpus']} of {r['gpus_measured']}",
                      f"{r['hours']:.2f}", f"{r['idle_gpu_hours']:.2f}", f"{r['mean_util_pct']:.1f}"]
                     for _, r in jobs.iterrows()]})
    return tables


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("slurmkit.report", "templates"),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True)


def page(report: Report, store: Store, *, now: datetime | None = None) -> str:
    """The whole HTML document for `report` (queries `store` again for the overview plots)."""
    from slurmkit import __version__

    totals = report.totals
    banners = [n for n in report.notes if n == SIMULATED_BANNER]
    if not report.empty and not (totals.get("gpu_hours_measured") or 0) > 0:
        banners.append("No GPU metrics in this window: utilization, used and wasted GPU-hours are unknown "
                       "(shown as \"no GPU metrics\", never as 0 %); allocation figures are exact.")
    scope = "" if report.scope.everyone else f"only the jobs of user {report.scope.user}"
    empty = report.empty_message() if report.empty else ""
    context = {
        "title": f"slurmkit: {title(report)}" if not empty else "slurmkit GPU report: no jobs",
        "window": report.window.describe(), "scope": scope, "banners": banners, "empty": empty,
        "cards": [] if empty else _cards(totals), "plots": [] if empty else _plots(report, store),
        "tables": [] if empty else _tables(report),
        "notes": [n for n in report.notes if n != SIMULATED_BANNER],
        "definitions": [*report.definitions, *([] if any(d.startswith("grades") for d in report.definitions)
                                                 else [grading.legend()])],
        "version": __version__,
        "generated": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
    }
    return _environment().get_template("page.html.j2").render(**context)
