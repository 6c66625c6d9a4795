"""The per-run SQL: one job run's report figures, written once for the usage rollup (slurmkit/store/rollup.py) and
the reports (slurmkit/report/query.py), so the two can never compute a figure differently.

* CTE ``g``: per job run, the sums over its GPU rows that the figures need (rows without util_mean are
  unmeasured); its one parameter is the idle threshold.
* CTE ``gs``: per job run and metric source, its GPU rows with metrics: one row per source, so any number of
  sources is counted (no column per source, no bit packing).
* run_figures: the additive figures of one run (the columns of usage_rollup), over ``jobs j LEFT JOIN g``.
* GROUP_KEYS: what a report groups by, as jobs columns (the keys the rollup keeps its sums per).
"""

from __future__ import annotations

# --by name -> jobs column. The usage rollup sums per all of them (usage_rollup and usage_rollup_sources).
GROUP_KEYS = {
    "user": "user_name",
    "account": "account",
    "partition": "partition",
    "gpu_type": "gpu_types",
    "node_type": "node_type",
    "qos": "qos",
    "cluster": "cluster",
}
KEY_COLUMNS: tuple[str, ...] = ("cluster", *(c for c in GROUP_KEYS.values() if c != "cluster"))  # table order
# Additive figures taken as a maximum, not a sum, when runs are added up.
MAX_COLUMNS = frozenset({"wait_max"})


def _restrict(jobs_filter: str, runs: str) -> str:
    if jobs_filter:
        runs = f"SELECT j.cluster, j.job_id, j.run FROM jobs j WHERE {jobs_filter}"
    return f"\n      AND (cluster, job_id, run) IN ({runs})" if runs else ""


def per_run_gpus(jobs_filter: str = "", runs: str = "") -> str:
    """CTE g (one parameter: the idle threshold). Four aggregates per GPU row: this is the widest scan of a report.

    `jobs_filter` (SQL over jobs j) or `runs` (a SELECT of cluster, job_id, run) limit g to the runs a narrow
    window needs, found through the jobs index instead of reading every GPU row."""
    return f"""g AS (
    SELECT cluster, job_id, run,
           COUNT(*) AS n_gpu,
           SUM(util_mean) AS util_sum,
           SUM(idle_fraction) AS idle_sum,
           SUM(CASE WHEN util_mean < ? THEN 1 ELSE 0 END) AS n_idle
    FROM job_gpus
    WHERE util_mean IS NOT NULL{_restrict(jobs_filter, runs)}
    GROUP BY cluster, job_id, run
)"""


def per_run_sources(jobs_filter: str = "", runs: str = "") -> str:
    """CTE gs: (cluster, job_id, run, source, n) = the run's GPU rows with metrics from each source."""
    return f"""gs AS (
    SELECT cluster, job_id, run, source, COUNT(*) AS n
    FROM job_gpus
    WHERE util_mean IS NOT NULL{_restrict(jobs_filter, runs)}
    GROUP BY cluster, job_id, run, source
)"""


def run_figures(seconds: str, first: str) -> list[tuple[str, str]]:
    """(column, SQL) of one job run's additive report figures over `jobs j LEFT JOIN g`: `seconds` of the run
    counted, `first` 1 where the run itself (its wait, its GPU counts) is counted, else 0."""
    multi = "(CASE WHEN j.gpus > 1 AND g.n_idle > 0 AND g.n_idle < g.n_gpu THEN g.n_idle ELSE 0 END)"
    measured = "(CASE WHEN g.n_gpu > j.gpus THEN j.gpus ELSE COALESCE(g.n_gpu, 0) END)"
    wait = "(j.start_time - j.submit_time)"
    return [("jobs", first), ("gpu_s", f"j.gpus * {seconds}"), ("measured_s", f"{measured} * {seconds}"),
            ("util_s", f"COALESCE(g.util_sum, 0) * {seconds}"), ("idle_s", f"COALESCE(g.idle_sum, 0) * {seconds}"),
            ("idle_multi", f"{first} * {multi}"), ("idle_multi_s", f"{multi} * {seconds}"),
            ("no_metrics", f"{first} * (CASE WHEN g.n_gpu IS NULL THEN 1 ELSE 0 END)"),
            ("wait_sum", f"{first} * {wait}"),
            ("wait_n", f"(CASE WHEN {first} = 1 AND {wait} IS NOT NULL THEN 1 ELSE 0 END)"),
            ("wait_max", f"(CASE WHEN {first} = 1 THEN {wait} END)")]


SUM_COLUMNS: tuple[str, ...] = tuple(name for name, _ in run_figures("0", "0"))


def select_list(figures: list[tuple[str, str]]) -> str:
    return ",\n           ".join(f"{sql} AS {name}" for name, sql in figures)


def sums(columns: tuple[str, ...] = SUM_COLUMNS) -> str:
    """The aggregate of each additive column, named as the column (SUM, MAX for MAX_COLUMNS)."""
    return ", ".join(f"{'MAX' if c in MAX_COLUMNS else 'SUM'}({c}) AS {c}" for c in columns)
