"""The record contract: what a job record and a node GPU record hold, as the spool, the store and the reports read it.

One definition at the bottom of the package (it imports nothing from slurmkit), so that the hooks that write
records (slurmkit/accounting/), the store that keeps them (slurmkit/store/) and the reports that read them
(slurmkit/report/) cannot disagree: the spool record's GPU entries, the job_gpus columns and the report's
per-GPU columns are all derived from GPU_FIELDS; the metric source names, their order and whether they are real
come from METRIC_SOURCES; IDLE_UTIL_PCT is the one idle threshold. The migrations in slurmkit/store/migrations/
are history and cannot be derived: tests/test_record_contract.py checks the migrated tables against this module.

Standard library only, nothing heavier than builtins: the jobcomp hook (python -S, once per job) imports it.
"""

from __future__ import annotations

JOB_KIND = "job"
JOB_VERSION = 1
GPUS_KIND = "gpus"
GPUS_VERSION = 1

# A GPU whose job-mean utilization is below this (percent) is idle: the sampler's idle_fraction counts the time
# below it, the reports' "idle GPUs in multi-GPU jobs" the GPUs below it.
IDLE_UTIL_PCT = 5.0


class Field:
    """One value of a record: its name in the record, Python type, unit, and the store column (and SQL type)."""

    __slots__ = ("column", "doc", "name", "report", "sql", "type", "unit")

    def __init__(self, name: str, type: type, unit: str = "", *, column: str | None = None, sql: str | None = None,
                 report: bool = True, doc: str = "") -> None:
        self.name = name
        self.type = type
        self.unit = unit
        self.column = column or name
        self.sql = sql or _SQL[type]
        self.report = report  # shown per GPU by `sk report job`
        self.doc = doc

    def __repr__(self) -> str:
        return f"Field({self.name!r})"


_SQL = {int: "BIGINT", float: "DOUBLE PRECISION", str: "TEXT"}

# The job record (kind "job"): one per job run, from the jobcomp hook or from sacct (reconcile, import-sacct).
# In this order they are the jobs table's columns; "ingested_at" is set by the store, "node_type" at ingest from
# the site's partition map (the hook does not read the site config).
JOB_FIELDS: tuple[Field, ...] = (
    Field("cluster", str), Field("job_id", int), Field("run", int, sql="INTEGER", doc="restart count"),
    Field("array_job_id", int), Field("array_task_id", int), Field("het_job_id", int),
    Field("het_job_offset", int, sql="INTEGER"), Field("job_name", str), Field("user_name", str),
    Field("uid", int, sql="INTEGER"), Field("account", str), Field("partition", str), Field("qos", str),
    Field("state", str), Field("exit_code", int, sql="INTEGER"), Field("submit_time", int, "s"),
    Field("start_time", int, "s"), Field("end_time", int, "s"), Field("elapsed_s", int, "s"), Field("nodes", str),
    Field("node_count", int, sql="INTEGER"), Field("cpus", int, sql="INTEGER"), Field("gpus", int, sql="INTEGER"),
    Field("gpu_types", str), Field("node_type", str), Field("tres", str), Field("source", str), Field("flags", str),
    Field("ingested_at", int, "s"),
)
JOB_COLUMNS: tuple[str, ...] = tuple(f.column for f in JOB_FIELDS)
JOB_KEY = ("cluster", "job_id", "run")

# One GPU of a node record (kind "gpus"): the entries of its "gpus" list, and the per-GPU columns of job_gpus.
GPU_FIELDS: tuple[Field, ...] = (
    Field("index", int, column="gpu_index", sql="INTEGER", doc="Slurm's GPU index on the node"),
    Field("uuid", str), Field("pci_bus_id", str, report=False), Field("model", str),
    Field("util_mean", float, "%", doc="time-weighted mean utilization over the job"),
    Field("util_max", float, "%"),
    Field("idle_fraction", float, doc="share of the time below IDLE_UTIL_PCT"),
    Field("mem_max_mib", int, "MiB"), Field("mem_total_mib", int, "MiB"),
    Field("energy_j", float, "J"), Field("power_max_w", float, "W", report=False),
    Field("samples", int, sql="INTEGER", doc="readings with at least one metric"),
)
# Fields of the node record itself that every one of its GPU rows carries.
GPU_RECORD_FIELDS: tuple[Field, ...] = (
    Field("cluster", str), Field("job_id", int), Field("run", int, sql="INTEGER"), Field("node", str),
)
GPU_ROW_FIELDS: tuple[Field, ...] = (Field("interval_s", float, "s", report=False), Field("source", str),
                                     Field("flags", str, report=False))
GPU_COLUMNS: tuple[str, ...] = tuple(f.column for f in (*GPU_RECORD_FIELDS, *GPU_FIELDS, *GPU_ROW_FIELDS))
GPU_KEY: tuple[str, ...] = (*(f.column for f in GPU_RECORD_FIELDS), "gpu_index")
# What `sk report job` shows per GPU (with the node it is on).
GPU_REPORT_COLUMNS: tuple[str, ...] = ("node", *(f.column for f in (*GPU_FIELDS, *GPU_ROW_FIELDS) if f.report))


class MetricSource:
    """A registered GPU metric source. `module`: where it is implemented (a module with ``make(**context)``
    returning the source object) for node sources; None for a source read elsewhere (`note` says where)."""

    __slots__ = ("doc", "module", "name", "note", "real")

    def __init__(self, name: str, *, real: bool, module: str | None = None, note: str = "", doc: str = "") -> None:
        self.name = name
        self.real = real  # False: pretend numbers, reports say so loudly
        self.module = module
        self.note = note
        self.doc = doc

    @property
    def on_node(self) -> bool:
        return self.module is not None

    def __repr__(self) -> str:
        return f"MetricSource({self.name!r})"


# In report order (the "metric source" column lists them so).
METRIC_SOURCES: tuple[MetricSource, ...] = (
    MetricSource("nvml", real=True, module="slurmkit.accounting.metrics.nvml",
                 doc="real NVIDIA GPUs through nvidia-ml-py"),
    MetricSource("dcgm", real=True, module="slurmkit.accounting.metrics.dcgm",
                 doc="DCGM job statistics through dcgmi"),
    MetricSource("slurm", real=True, note="Slurm gres/gpuutil is not a node metric source: it is read from sacct "
                 "after the job (slurmkit.accounting.slurm_gpuutil); use nvml or dcgm on the node",
                 doc="Slurm gres/gpuutil from sacct (last poll, per job)"),
    MetricSource("simulated", real=False, module="slurmkit.accounting.metrics.simulated",
                 doc="deterministic pretend readings (devcluster, tests, demos)"),
)
SOURCE_NAMES: tuple[str, ...] = tuple(s.name for s in METRIC_SOURCES)
# How a node's GPU summary leaves the node (slurmkit/accounting/transport.py): the spool, the job's AdminComment
# (which the job's owner can read through sacct: `sk report job`), or both.
TRANSPORTS: tuple[str, ...] = ("spool", "admin_comment", "spool+admin_comment")
BY_SOURCE: dict[str, MetricSource] = {s.name: s for s in METRIC_SOURCES}


def validate(rec: object) -> str | None:
    """A reason why `rec` (a parsed spool file or AdminComment segment) cannot be stored, or None when it can."""
    if not isinstance(rec, dict):
        return "record is not a JSON object"
    if rec.get("kind") == GPUS_KIND:
        return _validate_gpus(rec)
    if rec.get("version") != JOB_VERSION:
        return f"unknown record version {rec.get('version')!r} (this slurmkit reads {JOB_VERSION})"
    for key in ("cluster", "job_id"):
        if rec.get(key) in (None, ""):
            return f"missing {key}"
    if not isinstance(rec["job_id"], int):
        return f"job_id is not an integer: {rec['job_id']!r}"
    return None


def _validate_gpus(rec: dict) -> str | None:
    if rec.get("version") != GPUS_VERSION:
        return f"unknown gpus record version {rec.get('version')!r} (this slurmkit reads {GPUS_VERSION})"
    for key in ("cluster", "node", "source"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            return f"missing {key}"
    for key in ("job_id", "run"):
        if not isinstance(rec.get(key), int) or isinstance(rec.get(key), bool):
            return f"{key} is not an integer: {rec.get(key)!r}"
    gpus = rec.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, dict) and isinstance(g.get("index"), int) for g in gpus):
        return "gpus is not a list of objects with an integer index"
    return None


def is_gpus(rec: object) -> bool:
    return isinstance(rec, dict) and rec.get("kind") == GPUS_KIND
