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
    """One value of a record: its name in the record, Python type, unit, the store column (and SQL type), and
    what `validate` accepts: `lo`..`hi` (inclusive; ints default to the SQL type's range), `required` (neither
    missing nor null nor empty), `default` (what the store writes for a missing value of a NOT NULL column)."""

    __slots__ = ("column", "default", "doc", "hi", "lo", "name", "report", "required", "sql", "type", "unit")

    def __init__(self, name: str, type: type, unit: str = "", *, column: str | None = None, sql: str | None = None,
                 report: bool = True, doc: str = "", lo: float | None = None, hi: float | None = None,
                 required: bool = False, default: object = None) -> None:
        self.name = name
        self.type = type
        self.unit = unit
        self.column = column or name
        self.sql = sql or _SQL[type]
        self.report = report  # shown per GPU by `sk report job`
        self.doc = doc
        bound = _INT_RANGE.get(self.sql)
        self.lo = lo if lo is not None or not bound else -bound - 1
        self.hi = hi if hi is not None or not bound else bound
        self.required = required
        self.default = default

    def __repr__(self) -> str:
        return f"Field({self.name!r})"


_SQL = {int: "BIGINT", float: "DOUBLE PRECISION", str: "TEXT"}
_INT_RANGE = {"BIGINT": 2**63 - 1, "INTEGER": 2**31 - 1}  # PostgreSQL's int8/int4 (SQLite's are wider)
MAX_TEXT = 1 << 20  # characters of one text value (a job name, a TRES string): far above any real one

# The job record (kind "job"): one per job run, from the jobcomp hook or from sacct (reconcile, import-sacct).
# In this order they are the jobs table's columns; "ingested_at" is set by the store, "node_type" at ingest from
# the site's partition map (the hook does not read the site config).
JOB_FIELDS: tuple[Field, ...] = (
    Field("cluster", str, required=True), Field("job_id", int, lo=1, required=True),
    Field("run", int, sql="INTEGER", doc="restart count", lo=0, default=0),
    Field("array_job_id", int, lo=0), Field("array_task_id", int, lo=0), Field("het_job_id", int, lo=0),
    Field("het_job_offset", int, sql="INTEGER", lo=0), Field("job_name", str), Field("user_name", str),
    Field("uid", int, sql="INTEGER", lo=0), Field("account", str), Field("partition", str), Field("qos", str),
    Field("state", str), Field("exit_code", int, sql="INTEGER"), Field("submit_time", int, "s", lo=0),
    Field("start_time", int, "s", lo=0), Field("end_time", int, "s", lo=0), Field("elapsed_s", int, "s", lo=0),
    Field("nodes", str), Field("node_count", int, sql="INTEGER", lo=0), Field("cpus", int, sql="INTEGER", lo=0),
    Field("gpus", int, sql="INTEGER", lo=0, default=0), Field("gpu_types", str), Field("node_type", str),
    Field("tres", str), Field("source", str, required=True), Field("flags", str), Field("ingested_at", int, "s", lo=0),
)
JOB_COLUMNS: tuple[str, ...] = tuple(f.column for f in JOB_FIELDS)
JOB_KEY = ("cluster", "job_id", "run")

# One GPU of a node record (kind "gpus"): the entries of its "gpus" list, and the per-GPU columns of job_gpus.
GPU_FIELDS: tuple[Field, ...] = (
    Field("index", int, column="gpu_index", sql="INTEGER", doc="Slurm's GPU index on the node", lo=0,
          required=True),
    Field("uuid", str), Field("pci_bus_id", str, report=False), Field("model", str),
    Field("util_mean", float, "%", doc="time-weighted mean utilization over the job", lo=0, hi=100),
    Field("util_max", float, "%", lo=0, hi=100),
    Field("idle_fraction", float, doc="share of the time below IDLE_UTIL_PCT", lo=0, hi=1),
    Field("mem_max_mib", int, "MiB", lo=0), Field("mem_total_mib", int, "MiB", lo=0),
    Field("energy_j", float, "J", lo=0), Field("power_max_w", float, "W", report=False, lo=0),
    Field("samples", int, sql="INTEGER", doc="readings with at least one metric", lo=0),
)
# Fields of the node record itself that every one of its GPU rows carries.
GPU_RECORD_FIELDS: tuple[Field, ...] = (
    Field("cluster", str, required=True), Field("job_id", int, lo=1, required=True),
    Field("run", int, sql="INTEGER", lo=0, required=True), Field("node", str, required=True),
)
GPU_ROW_FIELDS: tuple[Field, ...] = (Field("interval_s", float, "s", report=False, lo=0),
                                     Field("source", str, required=True), Field("flags", str, report=False))
# Values of the node record that are not stored per GPU but are read (rollups, notes): checked all the same.
GPU_EXTRA_FIELDS: tuple[Field, ...] = (Field("started", float, "s", lo=0), Field("ended", float, "s", lo=0),
                                       Field("idle_threshold_pct", float, "%", lo=0, hi=100), Field("note", str))
MAX_GPUS = 4096  # GPU entries of one node record
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


def check(field: Field, value: object) -> str | None:
    """Why `value` cannot be `field`'s value in the store, or None. Ints are ints (not bools, not floats),
    floats are finite numbers, text is a string that encodes as UTF-8; each within the field's range."""
    if value is None or (value == "" and field.type is str):
        return f"missing {field.name}" if field.required else None
    if field.type is str:
        if type(value) is not str:
            return f"{field.name} is not a string: {_short(value)}"
        if len(value) > MAX_TEXT:
            return f"{field.name} is longer than {MAX_TEXT} characters"
        try:
            value.encode()
        except UnicodeEncodeError:
            return f"{field.name} is not UTF-8 text (a lone surrogate): {_short(value)}"
        return None
    if field.type is int:
        if type(value) is not int:
            return f"{field.name} is not an integer: {_short(value)}"
    elif type(value) not in (int, float) or value != value or value in (float("inf"), float("-inf")) or (
            type(value) is int and not -2**63 <= value < 2**63):
        return f"{field.name} is not a finite number: {_short(value)}"
    if (field.lo is not None and value < field.lo) or (field.hi is not None and value > field.hi):
        return f"{field.name} {_short(value)} is out of range {field.lo}..{field.hi}"
    return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_all(fields: tuple[Field, ...], rec: dict) -> str | None:
    for f in fields:
        reason = check(f, rec.get(f.name))
        if reason:
            return reason
    return None


def storable(rec: dict) -> dict:
    """`rec` with every undecodable byte in its text written as ``\\xNN`` (Python's backslashreplace of the
    original bytes). Slurm lets a job name (or account, ...) hold bytes that are not UTF-8; the hook's
    environment and sacct's output keep them as lone surrogates (surrogateescape), which no store can hold. So
    the record is stored, every other record after it too, and the bytes stay recoverable from the text."""
    out = dict(rec)
    for key, value in rec.items():
        if type(value) is str and not value.isascii():
            try:
                value.encode()
            except UnicodeEncodeError:
                out[key] = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return out


def validate(rec: object) -> str | None:
    """A reason why `rec` (a parsed spool file or AdminComment segment) cannot be stored, or None when it can:
    every field of the record contract is checked for type and range before the store sees it."""
    if not isinstance(rec, dict):
        return "record is not a JSON object"
    if rec.get("kind") == GPUS_KIND:
        return _validate_gpus(rec)
    if rec.get("version") != JOB_VERSION or type(rec.get("version")) is not int:
        return f"unknown record version {_short(rec.get('version'))} (this slurmkit reads {JOB_VERSION})"
    if rec.get("kind", JOB_KIND) != JOB_KIND:
        return f"unknown record kind {_short(rec.get('kind'))}"
    return _check_all(JOB_FIELDS, rec)


def _validate_gpus(rec: dict) -> str | None:
    if rec.get("version") != GPUS_VERSION or type(rec.get("version")) is not int:
        return f"unknown gpus record version {_short(rec.get('version'))} (this slurmkit reads {GPUS_VERSION})"
    reason = _check_all((*GPU_RECORD_FIELDS, *GPU_ROW_FIELDS, *GPU_EXTRA_FIELDS), rec)
    if reason:
        return reason
    gpus = rec.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, dict) for g in gpus):
        return "gpus is not a list of objects"
    if len(gpus) > MAX_GPUS:
        return f"gpus lists {len(gpus)} GPUs (at most {MAX_GPUS})"
    for g in gpus:
        reason = _check_all(GPU_FIELDS, g)
        if reason:
            return f"gpus[{gpus.index(g)}]: {reason}"
    if len({g["index"] for g in gpus}) != len(gpus):
        return "gpus lists a GPU index twice"
    return None


def is_gpus(rec: object) -> bool:
    return isinstance(rec, dict) and rec.get("kind") == GPUS_KIND
