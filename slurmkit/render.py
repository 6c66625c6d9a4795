"""Plan -> batch script text (Jinja2) -> SubmitRequest.

Every `{{ value }}` in a template is shell-quoted by the environment's finalize hook unless it is a `Shell`
string built by slurmkit.quoting, so a template cannot forget to quote; StrictUndefined turns a typo in a
template into an error instead of an empty string. Sites may add or override templates (site templates_dir).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import jinja2

from slurmkit import __version__
from slurmkit.config.userdirs import cache_dir
from slurmkit.errors import Problem, RenderError
from slurmkit.plan import Plan
from slurmkit.quoting import Shell, comment, q, sbatch_value, word_with_params, words
from slurmkit.request import SubmitRequest
from slurmkit.resources import TEMPLATES_DIR

MAIN_TEMPLATE = "job.sh.j2"

_RECIPE_TEXT = {
    "A": "recipe A (srun, one task per GPU, each rank binds itself to its GPU's NUMA node and HCA)",
    "B": "recipe B (torchrun, one task per node starting one rank per GPU; each rank binds itself)",
    "C": "recipe C (MPI, one rank per GPU via srun, nearest HCA per rank)",
    "-": "single process (launcher none)",
}


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


def environment(site_templates: Path | None = None) -> jinja2.Environment:
    """Site templates first (override or add), then the built-in job_templates/."""
    dirs = [str(site_templates)] if site_templates else []
    dirs.append(str(TEMPLATES_DIR))
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(dirs), undefined=jinja2.StrictUndefined, finalize=_finalize,
        bytecode_cache=_bytecode_cache(), **_ENV_OPTIONS)
    env.filters["words"] = words
    env.filters["comment"] = comment
    return env


def list_templates(site_templates: Path | None = None) -> list[tuple[str, str]]:
    """(name, where) of every template, site ones marked as overriding the built-ins."""
    builtin = {p.relative_to(TEMPLATES_DIR).as_posix() for p in TEMPLATES_DIR.rglob("*.j2")}
    site = set()
    if site_templates and site_templates.is_dir():
        site = {p.relative_to(site_templates).as_posix() for p in site_templates.rglob("*.j2")}
    out = []
    for name in sorted(builtin | site):
        where = ("site (overrides built-in)" if name in builtin else "site") if name in site else "built-in"
        out.append((name, where))
    return out


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
    if plan.spec.launcher == "torchrun" and argv[0].endswith(".py"):
        argv = ["python", *argv]  # torchrun runs with --no-python so that every rank passes the bind step
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
    bind = None if plan.spec.launcher == "none" or plan.spec.binding == "none" else plan.spec.binding
    if bind == "auto":
        bind = "preferred"  # CPUs + preferred local memory: strict membind can OOM one NUMA node
    ctx = {
        "plan": plan, "version": __version__,
        "source": comment(Path(plan.source_file).name) if plan.source_file else None,
        "recipe_text": Shell(_RECIPE_TEXT[plan.recipe]),
        "sbatch_lines": _sbatch_lines(plan),
        "env": env_items, "nccl_env": list(plan.nccl_env.items()),
        "array": _array_context(plan), "bind": bind,
        "srun": [q(o) for o in plan.srun], "command": _command_words(plan, params),
        "run": Shell("sk_run ") if plan.spec.preempt else Shell(""),
        "watchdog": plan.spec.preempt.requeue_after if plan.spec.preempt else None,
    }
    try:
        return environment(site_dir).get_template(MAIN_TEMPLATE).render(ctx)
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
        "recipe": plan.recipe, "launcher": plan.spec.launcher, "nodes": plan.spec.nodes,
        "gpus_per_node": plan.gpus_per_node, "tasks_per_node": plan.tasks_per_node,
        "cpus_per_task": plan.cpus_per_task, "world_size": plan.world_size, "sbatch": plan.sbatch,
        "srun": plan.srun, "nccl_env": plan.nccl_env, "binding": plan.spec.binding,
        "topology": [g.__dict__ for g in plan.topology],
        "warnings": [p.format() for p in plan.warnings],
    }))
