"""Plan -> batch script text (Jinja2) -> SubmitRequest.

Every `{{ value }}` in a template is shell-quoted by the environment's finalize hook unless it is a `Shell`
string built by slurmkit.quoting, so a template cannot forget to quote; StrictUndefined turns a typo in a
template into an error instead of an empty string. Sites may add or override templates (site templates_dir).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from slurmkit import __version__
from slurmkit.config.userdirs import cache_dir
from slurmkit.errors import Problem, RenderError
from slurmkit.launchers import Launcher
from slurmkit.plan import GpuTopo, Plan
from slurmkit.quoting import Shell, comment, q, sbatch_value, word_with_params, words
from slurmkit.request import SubmitRequest
from slurmkit.resources import TEMPLATES_DIR

MAIN_TEMPLATE = "job.sh.j2"



@dataclass(frozen=True)
class PreemptView:
    signal: str
    grace: int
    requeue: bool
    max_restarts: int
    requeue_after: int  # seconds after the signal at which a step still running is requeued anyway


@dataclass(frozen=True)
class PlanView:
    """What the templates read as `plan`: the planner's decisions, flat. Templates never see the job spec's or
    the site config's schema, so those can change without touching a template (a site's included)."""

    cluster: str
    partition_name: str
    node_type_name: str
    fabric: str
    launcher: Launcher
    nodes: int
    gpus_per_node: int
    tasks_per_node: int
    cpus_per_task: int
    world_size: int
    topology: list[GpuTopo]
    mpi: str
    master_port: int | None
    modules: list[str]
    modules_init: str | None
    preempt: PreemptView | None
    nccl_from_spec: bool  # the spec's nccl.env adds to the fabric's settings
    agent_ignores: bool  # the launcher's per-node agent starts with the preempt signal ignored


def plan_view(plan: Plan) -> PlanView:
    spec, site = plan.spec, plan.site
    p = spec.preempt
    preempt = PreemptView(p.signal, p.grace, p.requeue, p.max_restarts, p.requeue_after) if p else None
    return PlanView(
        cluster=site.cluster, partition_name=plan.partition_name, node_type_name=plan.node_type_name,
        fabric=plan.node_type.fabric.kind, launcher=plan.launcher, nodes=spec.nodes,
        gpus_per_node=plan.gpus_per_node, tasks_per_node=plan.tasks_per_node, cpus_per_task=plan.cpus_per_task,
        world_size=plan.world_size, topology=plan.topology, mpi=site.mpi, master_port=spec.master_port,
        modules=list(spec.modules), modules_init=site.modules_init, preempt=preempt,
        nccl_from_spec=bool(spec.nccl.env), agent_ignores=plan.launcher.agent_ignores(p.signal if p else None))


def _finalize(value: Any) -> str:
    if isinstance(value, Shell):
        return value
    if value is None:
        return ""
    return q(value)


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates cached per user: compiling them costs ~20 ms of every cold `sk render`.

    Jinja keys entries by template name and source checksum, so an edited template is recompiled. The
    directory is private (0700, the user's own), because loading bytecode runs it. A cache that cannot be
    read or written is simply not used.
    """

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, ValueError, EOFError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


# Compiled code depends on these options (delimiters, finalize), so they are part of the cache's name.
_ENV_OPTIONS: dict[str, Any] = dict(
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False,
    # bash uses "{#" (${#array[@]}), so Jinja comments get delimiters no shell script contains.
    comment_start_string="{#-sk", comment_end_string="sk-#}")


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    import hashlib

    key = hashlib.sha1(f"{__version__} {jinja2.__version__} {sorted(_ENV_OPTIONS.items())}".encode()).hexdigest()
    path = cache_dir(f"jinja-{key[:16]}")
    return _BytecodeCache(str(path)) if path else None


def template_dirs(site_templates: Path | None = None, launchers: Iterable[Launcher] = ()) -> list[Path]:
    """Where templates are looked up, in order: the site's (override or add), the launchers' own (a third-party
    launcher's partial), the built-in job_templates/."""
    dirs = [site_templates] if site_templates else []
    dirs += [la.template_dir for la in launchers if la.template_dir]
    return [*dirs, TEMPLATES_DIR]


def environment(site_templates: Path | None = None, launchers: Iterable[Launcher] = ()) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(d) for d in template_dirs(site_templates, launchers)]),
        undefined=jinja2.StrictUndefined, finalize=_finalize,
        bytecode_cache=_bytecode_cache(), **_ENV_OPTIONS)
    env.filters["words"] = words
    env.filters["comment"] = comment
    return env


def list_templates(site_templates: Path | None = None, launchers: Iterable[Launcher] = ()) -> list[tuple[str, str]]:
    """(name, where) of every template: the one the lookup finds first, marked when it overrides another."""
    found: dict[str, list[str]] = {}
    for d in template_dirs(site_templates, launchers):
        where = ("site" if d == site_templates else "built-in" if d == TEMPLATES_DIR
                 else "launcher " + next(la.name for la in launchers if la.template_dir == d))
        for p in sorted(d.rglob("*.j2")) if d.is_dir() else []:
            found.setdefault(p.relative_to(d).as_posix(), []).append(where)
    return [(name, f"{w[0]} (overrides {w[1]})" if len(w) > 1 else w[0]) for name, w in sorted(found.items())]


def _sbatch_lines(plan: Plan) -> list[Shell]:
    lines = []
    for key, value in plan.sbatch.items():
        if value is None:
            lines.append(Shell(f"#SBATCH --{key}"))
        else:
            lines.append(Shell(f"#SBATCH --{key}={sbatch_value(value, key)}"))
    return lines


def _command_words(plan: Plan, params: set[str]) -> list[Shell]:
    argv = plan.spec.argv
    if argv[0].endswith(".py"):
        # One rule for every launcher: torchrun and accelerate run their ranks with their no-python option (so
        # that every rank passes the bind step), and `train.py` alone would fail on the node under srun or mpi.
        argv = ["python", *argv]
    words = [word_with_params(a, params, "command") for a in argv]
    c = plan.spec.container
    if c and plan.container_runtime == "apptainer":
        pre = ["apptainer", "exec", "--nv"]
        for m in c.mounts:
            pre += ["--bind", m]
        if c.workdir:
            pre += ["--pwd", c.workdir]
        words = [q(w) for w in [*pre, c.image]] + words
    return words


def _array_context(plan: Plan) -> dict[str, Any] | None:
    arr = plan.spec.array
    if arr is None:
        return None
    params = []
    if arr.grid is not None:
        for name, values in arr.grid.items():
            params.append({"name": name, "count": len(values),
                           "words": Shell(" ".join(q(_scalar(v)) for v in values))})
    else:
        assert arr.tasks is not None
        for name in arr.names:
            params.append({"name": name, "count": len(arr.tasks),
                           "words": Shell(" ".join(q(_scalar(t[name])) for t in arr.tasks))})
    return {"size": arr.size, "grid": arr.grid is not None, "params": params}


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def render(plan: Plan) -> str:
    """The batch script for `plan`. Raises RenderError for values that cannot be expressed safely."""
    site_dir = plan.site.resolve_path(plan.site.templates_dir) if plan.site.templates_dir else None
    params = set(plan.spec.array.names) if plan.spec.array else set()
    env_items = [(k, word_with_params(v, params, f"env.{k}")) for k, v in plan.env.items()]
    bind = None if not plan.launcher.distributed or plan.spec.binding == "none" else plan.spec.binding
    if bind == "auto":
        bind = "preferred"  # CPUs + preferred local memory: strict membind can OOM one NUMA node
    ctx = {
        "plan": plan_view(plan), "version": __version__,
        "source": comment(Path(plan.source_file).name) if plan.source_file else None,
        "sbatch_lines": _sbatch_lines(plan),
        "env": env_items, "nccl_env": list(plan.nccl_env.items()),
        "array": _array_context(plan), "bind": bind,
        "srun": [q(o) for o in plan.srun], "command": _command_words(plan, params),
        "run": Shell("sk_run ") if plan.spec.preempt else Shell(""),
        "watchdog": plan.spec.preempt.requeue_after if plan.spec.preempt else None,
    }
    try:
        return environment(site_dir, [plan.launcher]).get_template(MAIN_TEMPLATE).render(ctx)
    except jinja2.TemplateNotFound as exc:
        raise RenderError(Problem(f"template {exc.name!r} not found", file=str(site_dir or TEMPLATES_DIR),
                                  hint="see `sk templates`")) from exc
    except jinja2.TemplateSyntaxError as exc:
        raise RenderError(Problem(f"template syntax error: {exc.message}", file=exc.filename,
                                  line=exc.lineno)) from exc
    except jinja2.UndefinedError as exc:
        raise RenderError(Problem(f"template uses an undefined value: {exc.message}",
                                  hint="a site template refers to something the planner does not provide")) from exc


def build_request(plan: Plan, script: str, tag: str | None = None) -> SubmitRequest:
    """The submission for a rendered script; the tag (for idempotent retries) is fresh per submission.

    The tag is 16 random hex digits from os.urandom (`import uuid` would import platform: ~5 ms of a cold
    `sk submit`)."""
    return SubmitRequest(
        name=plan.spec.name, script=script, options=dict(plan.sbatch), tag=tag or os.urandom(8).hex(),
        workdir=plan.spec.workdir or str(Path.cwd()), environment={}, source=plan.source_file)


def plan_summary(plan: Plan) -> dict[str, Any]:
    """What `sk render --explain` and `--json` show: the decisions, not the text."""
    import json

    return json.loads(json.dumps({
        "cluster": plan.site.cluster, "partition": plan.partition_name, "node_type": plan.node_type_name,
        "launcher": plan.launcher.name, "launcher_summary": plan.launcher.summary,
        "launcher_explanation": plan.launcher.explanation, "nodes": plan.spec.nodes,
        "gpus_per_node": plan.gpus_per_node, "tasks_per_node": plan.tasks_per_node,
        "cpus_per_task": plan.cpus_per_task, "world_size": plan.world_size, "sbatch": plan.sbatch,
        "srun": plan.srun, "nccl_env": plan.nccl_env, "binding": plan.spec.binding,
        "topology": [g.__dict__ for g in plan.topology],
        "warnings": [p.format() for p in plan.warnings],
    }))
