"""What each reported figure means. The definitions are printed with every report, so a number never travels
without the rule that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmkit.record import IDLE_UTIL_PCT, METRIC_SOURCES


@dataclass(frozen=True)
class Figure:
    column: str
    label: str
    unit: str
    definition: str


FIGURES: tuple[Figure, ...] = (
    Figure("jobs", "jobs", "", "GPU job runs (a requeued job's runs count separately, each with its own time; an "
           "array task or a multi-node job counts once per allocation). With a period, a job counts in the period "
           "it started in (jobs started before the window: in the first period)."),
    Figure("gpu_hours", "GPU-h", "GPU-h", "allocated GPU-hours: GPUs allocated x hours of the job inside the window "
           "(a job running across --since/--until counts only its part inside)."),
    Figure("share_pct", "share %", "%", "this row's allocated GPU-hours / all rows' allocated GPU-hours x 100."),
    Figure("gpu_hours_measured", "meas GPU-h", "GPU-h", "allocated GPU-hours of the GPUs that have "
           "utilization metrics."),
    Figure("gpu_hours_used", "used GPU-h", "GPU-h", "sum over measured GPUs of util_mean/100 x hours "
           "(utilization-weighted)."),
    Figure("mean_util_pct", "util %", "%", "used GPU-h / meas GPU-h x 100; empty when nothing was "
           "measured (never shown as 0 %)."),
    Figure("gpu_hours_wasted", "wasted GPU-h", "GPU-h", "sum over measured GPUs of idle_fraction x hours: the "
           "GPU-hours during which the sampler saw the GPU idle (below its idle threshold)."),
    Figure("waste_pct", "waste %", "%", "wasted GPU-h / meas GPU-h x 100."),
    Figure("idle_gpus_in_multi", "idle GPUs", "", f"GPUs with mean utilization below "
           f"{IDLE_UTIL_PCT:g} % in a multi-GPU job in which at least one other GPU was above it."),
    Figure("idle_gpu_hours_in_multi", "idle GPU-h", "GPU-h", "the allocated hours of those idle GPUs."),
    Figure("jobs_no_metrics", "no-metric jobs", "", "GPU jobs with no per-GPU metrics at all: counted here, "
           "left out of utilization and waste, never counted as 0 %."),
    Figure("gpu_hours_unmeasured", "unmeas GPU-h", "GPU-h", "allocated GPU-hours without metrics "
           "(GPU-h - meas GPU-h)."),
    Figure("mean_wait_h", "wait h", "h", "mean queue wait (start - submit) of the counted jobs, hours."),
    Figure("max_wait_h", "max wait h", "h", "longest queue wait, hours."),
    Figure("capacity_gpu_hours", "capacity GPU-h", "GPU-h", "the cluster's GPUs x hours, from Slurm's records "
           "of its registered TRES (sacctmgr show event Event=Cluster; sreport's Reported)."),
    Figure("down_gpu_hours", "down GPU-h", "GPU-h", "GPUs x hours of nodes down, drained or failed (Slurm's node "
           "events, not in a maintenance state; sreport's Down)."),
    Figure("planned_down_gpu_hours", "plnd down GPU-h", "GPU-h", "GPUs x hours of nodes FUTURE or powered down "
           "(sreport's PLND Down)."),
    Figure("available_gpu_hours", "avail GPU-h", "GPU-h", "capacity GPU-h - down GPU-h - plnd down GPU-h."),
    Figure("occupancy_pct", "occupancy %", "%", "GPU-h (allocated) / avail GPU-h x 100."),
    Figure("grade", "grade", "", "efficiency grade from mean utilization (thresholds below)."),
    Figure("sources", "source", "", "where the per-GPU numbers came from: "
           + "; ".join(f"{s.name} ({s.doc})" for s in METRIC_SOURCES) + "."),
)

BY_COLUMN = {f.column: f for f in FIGURES}

# Which figures each report kind shows, in order.
COLUMNS = {
    "usage": ["jobs", "gpu_hours", "share_pct", "gpu_hours_used", "mean_util_pct", "gpu_hours_wasted",
              "jobs_no_metrics", "gpu_hours_unmeasured", "mean_wait_h", "sources"],
    "efficiency": ["jobs", "gpu_hours", "mean_util_pct", "grade", "gpu_hours_wasted", "waste_pct",
                   "idle_gpus_in_multi", "idle_gpu_hours_in_multi", "jobs_no_metrics", "sources"],
    "top": ["jobs", "gpu_hours", "share_pct", "gpu_hours_used", "mean_util_pct", "gpu_hours_wasted", "grade"],
    "allocation": ["jobs", "gpu_hours", "share_pct", "mean_wait_h", "max_wait_h"],
    "occupancy": ["capacity_gpu_hours", "down_gpu_hours", "planned_down_gpu_hours", "available_gpu_hours",
                  "gpu_hours", "occupancy_pct"],
}


# Which figures a terminal table leaves out, first to last, until it fits the terminal (100 columns when it is not
# one; $COLUMNS decides): the ones another column or the notes imply. The others are always shown; --columns
# chooses exactly, and csv/json/parquet/html always carry every column.
NARROW_DROPS = ("sources", "gpu_hours_unmeasured", "max_wait_h", "jobs_no_metrics", "share_pct", "gpu_hours_used",
                "idle_gpu_hours_in_multi", "mean_wait_h", "waste_pct", "idle_gpus_in_multi")


def definitions(columns: list[str]) -> list[str]:
    return [f"{BY_COLUMN[c].label}: {BY_COLUMN[c].definition}" for c in columns if c in BY_COLUMN]
