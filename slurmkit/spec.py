"""The job spec: what a user writes in train.yaml. Typed, strict (unknown keys are errors with a suggestion).

Layering (lowest first): built-in defaults < site/partition defaults < the spec file < `--set key=value`.
Site defaults are applied by the planner (plan.py), which knows the partition; this module holds the model,
the file loading and the `--set` overrides.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, field_validator, model_validator
from pydantic import Strict as StrictType

from slurmkit.config.modeldata import ArraySpecMixin, JobSpecMixin, PreemptMixin
from slurmkit.config.source import Source, load, loads
from slurmkit.config.strict import Strict, validate
from slurmkit.config.units import parse_mem_mib, parse_time_minutes
from slurmkit.errors import Problem, SpecError
from slurmkit.launchers import GROUP, all_launchers, builtin_names, launcher_names
from slurmkit.launchers import get as get_launcher
from slurmkit.slurm.fields import MAX_JOB_ID

BindPolicy = Literal["auto", "none", "membind", "preferred", "cpus"]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_MODULE = re.compile(r"^[A-Za-z0-9_.+/@:-]+$")
# An integer written as one: YAML `true` is not 1 node, and 2.0 or "2" are not counts either.
Int = Annotated[int, StrictType()]


def _env_name(name: str) -> str:
    """A name that `export NAME=...` accepts: a shell identifier."""
    if not _ENV_NAME.match(name):
        raise ValueError(f"{name!r} is not an environment variable name (letters, digits and _, not starting "
                         "with a digit)")
    return name


def _no_nul(value: Any) -> Any:
    if "\x00" in str(value):
        raise ValueError("contains a NUL byte, which an environment variable cannot hold")
    return value


def _not_bool(what: str) -> BeforeValidator:
    """Refuse YAML true/false where pydantic would read them as 1/0."""

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"{what}, not {str(value).lower()}")
        return value
    return BeforeValidator(check)


def _job_ref(ref: int | str) -> int | str:
    """A job id (1..MAX_JOB_ID, as a number or digits) or the name of another spec in the same submit."""
    text = str(ref)
    if isinstance(ref, int) or (text.isascii() and text.isdigit()):
        if not 1 <= int(text) <= MAX_JOB_ID:
            raise ValueError(f"{text} is not a Slurm job id (1 to {MAX_JOB_ID})")
    elif text.isdigit() or not text.strip():
        raise ValueError(f"{ref!r} is neither a job id nor a spec name")
    return ref


EnvName = Annotated[str, AfterValidator(_env_name)]
JobRef = Annotated[Int | str, _not_bool("a job id or the name of a spec"), AfterValidator(_job_ref)]
ExtraValue = Annotated[str | Int | None, _not_bool("a value, or nothing (`hold:`) for an option without one"),
                       AfterValidator(lambda v: _no_control(v, "the value") if isinstance(v, str) else v)]


def _launcher_name(name: str) -> str:
    """A registered launcher: a built-in (no entry-point scan), else one from the entry-point group."""
    if name in builtin_names() or name in launcher_names():
        return name
    from slurmkit.config.suggest import did_you_mean

    raise ValueError(f"{name!r} is not a launcher installed here; {did_you_mean(name, launcher_names())}")


def _no_control(value: str, what: str) -> str:
    if any(ord(c) < 32 and c != "\t" for c in value) or "\x7f" in value:
        raise ValueError(f"{what} must be a single line without control characters (found a newline or "
                         "control character)")
    return value


class Container(Strict):
    image: str = Field(description="image: a pyxis/enroot URI (nvcr.io#nvidia/pytorch:24.05-py3), a .sqsh "
                                   "file, or an Apptainer .sif")
    mounts: list[str] = Field(default_factory=list, description="SRC:DST[:ro] bind mounts")
    runtime: Literal["pyxis", "apptainer"] | None = Field(None, description="default: the site's runtime")
    workdir: str | None = Field(None, description="working directory inside the container")

    @field_validator("mounts")
    @classmethod
    def _mounts(cls, v: list[str]) -> list[str]:
        for m in v:
            _no_control(m, "a mount")
            if "," in m or ":" not in m:
                raise ValueError(f"mount {m!r} must look like /src:/dst or /src:/dst:ro (no commas)")
        return v


class NcclSpec(Strict):
    debug: Literal["WARN", "INFO", "TRACE", "VERSION"] | None = Field(
        None, description="NCCL_DEBUG; INFO to debug a hang, unset (or WARN) in production")
    debug_subsys: str | None = Field(None, description="NCCL_DEBUG_SUBSYS, e.g. INIT,NET")
    env: dict[EnvName, Annotated[str | int, AfterValidator(_no_nul)]] = Field(
        default_factory=dict, description="extra NCCL_* settings (linted)")
    allow_unknown: list[EnvName] = Field(default_factory=list,
                                     description="NCCL_* names your NCCL build has but the lint does not know")


class Preempt(PreemptMixin, Strict):
    """Time-limit/preemption handling: Slurm signals the batch shell `grace` seconds before the end."""

    signal: Literal["USR1", "USR2", "TERM", "INT"] = "USR1"
    grace: Int = Field(120, ge=10, le=65535, description="seconds before the end to send the signal")
    requeue: bool = Field(True, description="requeue the job (scontrol requeue) when the signal arrives")
    max_restarts: Int = Field(3, ge=0, le=1000, description="stop requeueing after this many restarts")


class Mail(Strict):
    user: str

    @field_validator("user")
    @classmethod
    def _user(cls, v: str) -> str:
        return _no_control(v, "the address")
    type: list[Literal["BEGIN", "END", "FAIL", "REQUEUE", "ALL", "TIME_LIMIT", "TIME_LIMIT_80",
                       "ARRAY_TASKS"]] = Field(default_factory=lambda: ["END", "FAIL"])


class ArraySpec(ArraySpecMixin, Strict):
    """A sweep: ONE Slurm job array; each task looks its parameters up by SLURM_ARRAY_TASK_ID."""

    grid: dict[str, list[str | int | float | bool]] | None = Field(
        None, description="cartesian product of parameter values")
    tasks: list[dict[str, str | int | float | bool]] | None = Field(
        None, description="explicit list of parameter sets")
    max_parallel: Int | None = Field(None, ge=1, description="at most this many tasks at once (--array=...%N)")

    @model_validator(mode="after")
    def _one(self) -> ArraySpec:
        if (self.grid is None) == (self.tasks is None):
            raise ValueError("give exactly one of array.grid or array.tasks")
        names: set[str] = set()
        if self.grid is not None:
            if not self.grid:
                raise ValueError("array.grid has no parameters; give each one a list of values, e.g. "
                                 "{lr: [0.1, 0.01]}")
            for k, vals in self.grid.items():
                if not vals:
                    raise ValueError(f"array.grid.{k} is empty")
            names = set(self.grid)
        else:
            assert self.tasks is not None
            if not self.tasks:
                raise ValueError("array.tasks is empty")
            names = set(self.tasks[0])
            if not names:
                raise ValueError("array.tasks[0] has no parameters, e.g. {lr: 0.1}")
            for i, t in enumerate(self.tasks):
                if set(t) != names:
                    raise ValueError(f"array.tasks[{i}] has keys {sorted(t)}, task 0 has {sorted(names)}")
        for n in names:
            if not _PARAM_NAME.match(n):
                raise ValueError(f"parameter name {n!r} must be a valid identifier (letters, digits, _)")
        if self.size > 1_000_000:
            raise ValueError(f"the sweep has {self.size} tasks; Slurm's MaxArraySize is far smaller")
        return self


class JobSpec(JobSpecMixin, Strict):
    """A GPU job, described by what it needs; the planner turns it into Slurm options and a binding."""

    name: str = Field(description="job name (sbatch --job-name)")
    command: str | list[str] = Field(description="program and arguments; a string is split like a shell "
                                                 "would, but never run through one ({param} = sweep value); a "
                                                 "first word ending in .py runs with python, whatever the "
                                                 "launcher")
    partition: str | None = Field(None, description="default: the site's default_partition")
    account: str | None = None
    qos: str | None = Field(None, description="default: the partition's default_qos")
    nodes: Int = Field(1, ge=1, le=100000)
    gpus_per_node: Int | None = Field(None, ge=1, description="default: all GPUs of the node type")
    gpus: Int | None = Field(None, ge=1, description="total GPUs instead of gpus_per_node (split over nodes)")
    gpu_type: str | None = Field(None, description="gres type, e.g. a100; default: the node type's")
    cpus_per_gpu: Int | None = Field(None, ge=1, description="default: the partition's default_cpus_per_gpu")
    mem_per_gpu: str | None = Field(None, description="e.g. 64G; default: the partition's default_mem_per_gpu")
    time: str | None = Field(None, description="time limit (30, 04:00:00, 2-00:00:00); default: partition's")
    exclusive: bool = Field(False, description="whole nodes only (sbatch --exclusive)")
    launcher: Annotated[str, AfterValidator(_launcher_name)] = Field(
        "srun", description="; ".join(f"{la.name}: {la.summary}" for la in map(get_launcher, builtin_names()))
        + f"; or a launcher installed in the entry-point group {GROUP}")
    binding: BindPolicy = Field("auto", description="auto (= CPUs + preferred local memory), membind (strict), "
                                                    "preferred, cpus (CPUs only), none")
    workdir: str | None = Field(None, description="working directory (default: where you submit from)")
    output: str | None = Field(None, description="stdout file (Slurm patterns %x %j %A %a); default "
                                                 "%x-%j.out")
    error: str | None = Field(None, description="stderr file; default: together with output")
    env: dict[EnvName, Annotated[str | int | float | bool, AfterValidator(_no_nul)]] = Field(default_factory=dict)
    modules: list[str] = Field(default_factory=list, description="environment modules to load")
    container: Container | None = None
    nccl: NcclSpec = Field(default_factory=NcclSpec)
    dependency: dict[Literal["after", "afterok", "afternotok", "afterany", "aftercorr"],
                     list[JobRef]] | None = Field(
        None, description="{afterok: [12345, other-spec-name]}: job ids or names of specs in the same submit")
    preempt: Preempt | None = Field(None, description="signal + requeue before the time limit")
    mail: Mail | None = None
    array: ArraySpec | None = None
    master_port: Int | None = Field(None, ge=1024, le=65535, description="default: 20000 + job id % 20000")
    sbatch_extra: dict[str, ExtraValue] = Field(
        default_factory=dict, description="escape hatch: more sbatch options (validated), e.g. {constraint: "
                                          "hdr, reservation: big}")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        _no_control(v, "name")
        if not v.strip():
            raise ValueError("name must not be empty")
        if len(v) > 200:
            raise ValueError("name is longer than 200 characters")
        return v

    @field_validator("command")
    @classmethod
    def _command(cls, v: str | list[str]) -> str | list[str]:
        if isinstance(v, str):
            _no_control(v, "command (use a list for arguments)")
            try:
                if not shlex.split(v):
                    raise ValueError("command is empty")
            except ValueError as exc:
                raise ValueError(f"command cannot be split into arguments: {exc}") from None
        else:
            if not v:
                raise ValueError("command is an empty list")
            for a in v:
                if "\x00" in a:
                    raise ValueError("command arguments cannot contain NUL bytes")
        return v

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)  # `time: 90` is minutes, as in sbatch --time=90
        if isinstance(v, str):
            parse_time_minutes(v)
        return v

    @field_validator("mem_per_gpu")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem_mib(v)
        return v

    @field_validator("modules")
    @classmethod
    def _modules(cls, v: list[str]) -> list[str]:
        for m in v:
            if not _MODULE.match(m):
                raise ValueError(f"module name {m!r} has characters module names do not use")
        return v

    @field_validator("workdir", "output", "error", "account", "qos", "partition", "gpu_type")
    @classmethod
    def _line(cls, v: str | None) -> str | None:
        if v is not None:
            _no_control(v, "value")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> JobSpec:
        if self.gpus is not None and self.gpus_per_node is not None:
            raise ValueError("give gpus (total) or gpus_per_node, not both")
        if self.nodes > 1 and not get_launcher(self.launcher).distributed:
            multi = [la.name for la in all_launchers() if la.distributed]
            raise ValueError(f"launcher {self.launcher!r} runs the command once, on one node; use "
                             f"{', '.join(multi[:-1])} or {multi[-1]} for multi-node jobs")
        return self


def parse_set(assignments: list[str]) -> list[tuple[list[str], Any, str]]:
    """'--set key.path=value' -> (path, YAML-typed value, original text). Values are parsed as YAML scalars."""
    out = []
    for text in assignments:
        key, eq, raw = text.partition("=")
        if not eq or not key.strip():
            raise SpecError(Problem(f"--set {text!r}: expected key=value, e.g. --set nodes=2",
                                    file="--set"))
        try:
            value = loads(f"v: {raw}" if raw.strip() else "v: ''", "--set").data["v"]
        except Exception:
            value = raw
        out.append((key.strip().split("."), value, text))
    return out


def apply_set(data: dict[str, Any], sets: list[tuple[list[str], Any, str]]) -> None:
    for path, value, _text in sets:
        cur = data
        for part in path[:-1]:
            nxt = cur.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                cur[part] = nxt
            cur = nxt
        cur[path[-1]] = value


def spec_from_source(src: Source, overrides: list[str] | None = None) -> JobSpec:
    if overrides:
        sets = parse_set(overrides)
        apply_set(src.data, sets)
        src.overridden.update({tuple(path): text for path, _value, text in sets})
    return validate(JobSpec, src, SpecError)


def load_spec(path: str, overrides: list[str] | None = None) -> tuple[JobSpec, Source]:
    """Read, override and validate a spec; the Source is kept so the planner can locate its problems."""
    src = load(path)
    return spec_from_source(src, overrides), src
