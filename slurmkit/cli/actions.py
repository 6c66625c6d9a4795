"""What `sk validate`, `sk render` and `sk submit` do: spec -> plan -> script -> backend, free of click.

The click commands (jobs.py) and the click-free fast path (fast.py) both call these, so the two print the same.
Heavy modules are imported inside the functions so each command pays only for what it uses.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from slurmkit.cli.output import echo, echo_json

if TYPE_CHECKING:
    from slurmkit.backends.base import Backend
    from slurmkit.inputs import SpecFile
    from slurmkit.plan import Plan


def _plan(f: SpecFile, site_path: str | None, deps: dict[str, int] | None = None, paths: bool = True) -> Plan:
    # Order of the checks (and so of the first error a user sees): the spec's YAML (read_spec), the site
    # config, then the spec itself. Both are plain copies of the validated models (inputs.py).
    from slurmkit import inputs
    from slurmkit.plan import make_plan
    from slurmkit.site.lookup import find_site_file

    site = inputs.load_site(find_site_file(site_path))
    from slurmkit.preflight import check_paths

    spec, src = f.validate()
    plan = make_plan(spec, site, src, deps)  # type: ignore[arg-type] - the copies quack like the models
    if paths:  # validate and submit: where the job will run; `sk render` only shows a script
        plan.warnings.extend(check_paths(plan, src))
    return plan


def _warn(plan: Plan) -> None:
    for w in plan.warnings:
        echo(w.format(), err=True)


def _placeholder_deps(f: SpecFile) -> dict[str, int]:
    """For validate/render alone, dependencies on specs by name get a stand-in id (0) so the rest is checked."""
    from slurmkit.inputs import dependency_names

    return dict.fromkeys(dependency_names(f.data), 0)


def validate(specs: tuple[str, ...], site_path: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    from dataclasses import asdict

    from slurmkit.errors import EXIT_USAGE, InputError, SiteConfigError
    from slurmkit.inputs import read_spec
    from slurmkit.render import plan_summary

    results = []
    failed = False
    for path in specs:  # every spec is checked, and every problem of each is reported, before the exit status
        try:
            f = read_spec(path, list(overrides))
            plan = _plan(f, site_path, _placeholder_deps(f))
        except SiteConfigError:
            raise  # the site is the same for every spec: once is enough
        except InputError as exc:
            failed = True
            if as_json:
                results.append({"file": path, "ok": False, "problems": [asdict(p) for p in exc.problems]})
            else:
                echo(exc.format(), err=True)
            continue
        _warn(plan)
        results.append({"file": path, "ok": True, "warnings": [asdict(w) for w in plan.warnings],
                        **plan_summary(plan)})
        if not as_json:
            echo(f"{path}: ok (launcher {plan.launcher.name}: {plan.spec.nodes} node(s) x {plan.gpus_per_node} "
                 f"{plan.sbatch['gpus-per-node'].split(':')[0]} GPU(s), partition {plan.partition_name})")
    if as_json:
        echo_json(results)
    if failed:
        sys.exit(EXIT_USAGE)


def render(spec: str, output: str | None, site_path: str | None, overrides: tuple[str, ...], explain: bool) -> None:
    from slurmkit.inputs import read_spec
    from slurmkit.render import render as render_script

    f = read_spec(spec, list(overrides))
    plan = _plan(f, site_path, _placeholder_deps(f), paths=False)
    _warn(plan)
    if explain:
        from slurmkit.backends import choose
        from slurmkit.render import plan_summary

        choice = choose(None, plan.site)  # what `sk submit` would use; named, not built (a render needs none)
        echo_json({**plan_summary(plan), "backend": choice.name, "backend_reason": choice.reason})
        return
    script = render_script(plan)
    if output:
        try:
            Path(output).write_text(script)
        except OSError as exc:
            from slurmkit.errors import InputError, Problem

            raise InputError(Problem(f"cannot write the script: {exc.strerror or exc}", file=output,
                                     key="--output")) from None
        echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(script)


def _order(files: dict[str, SpecFile]) -> list[tuple[str, str]]:
    """(path, job name) in an order where a spec comes after the specs it depends on by name."""
    from slurmkit.errors import Problem, SpecError
    from slurmkit.inputs import dependency_names

    info = {path: (str(f.data.get("name", path)), dependency_names(f.data)) for path, f in files.items()}
    done: list[tuple[str, str]] = []
    pending = dict(info)
    while pending:
        ready = [p for p, (_, needs) in pending.items() if needs <= {n for _, n in done}]
        if not ready:
            raise SpecError(Problem("dependencies between these specs form a cycle or name a spec not given: "
                                    + ", ".join(sorted(pending)), hint="each name in dependency must be the "
                                    "`name` of a spec in the same sk submit, or a job id"))
        for p in ready:
            done.append((p, pending.pop(p)[0]))
    return done


def _requests(files: dict[str, SpecFile], site_path: str | None, backend: str | None, resolved: dict[str, int],
              dry_run: bool):
    """(path, name, backend, request) per spec, in dependency order; `resolved` is read as each one is planned,
    so a caller that submits the previous request and records its job id there gets the dependency right."""
    from slurmkit.render import build_request
    from slurmkit.render import render as render_script

    be = None
    for path, name in _order(files):
        f = files[path]
        plan = _plan(f, site_path, resolved if not dry_run else {**_placeholder_deps(f), **resolved})
        _warn(plan)
        request = build_request(plan, render_script(plan))
        if be is None:  # built with the site for a dry run too: it shows the site's rest_url, not a default
            from slurmkit.backends import get_backend

            be = get_backend(backend, plan.site)
        yield path, name, be, request


def read_specs(specs, overrides) -> dict[str, SpecFile]:
    """Every spec's YAML is read (and checked) before anything is submitted."""
    from slurmkit.inputs import read_spec

    return {str(p): read_spec(str(p), list(overrides)) for p in dict.fromkeys(specs)}


def submit_specs(specs, site_path: str | None = None, overrides=(), backend: str | None = None,
                 test_only: bool = False) -> tuple[list[dict], Backend]:
    """Submit specs (dependencies by name resolved in order): one result dict per spec, and the backend that
    submitted them. No output but warnings (stderr): the CLI and the Python API (slurmkit.api) print or keep these."""
    from slurmkit.submission import submit as submit_request

    resolved: dict[str, int] = {}
    out = []
    be = None
    for path, name, be, request in _requests(read_specs(specs, overrides), site_path, backend, resolved, False):
        result = submit_request(be, request, test_only=test_only)
        if result.job_id:
            resolved[name] = result.job_id
        item = {"file": path, "name": name, "job_id": result.job_id, "cluster": result.cluster,
                "backend": result.backend, "reused": result.reused, "tag": request.tag}
        if test_only:
            item["test_only"] = result.test_only
        out.append(item)
    assert be is not None  # at least one spec: click and the API require it
    return out, be


def submit(specs: tuple[str, ...], site_path: str | None, overrides: tuple[str, ...], backend: str | None,
           dry_run: bool, test_only: bool, as_json: bool, parsable: bool = False) -> None:
    if parsable and (as_json or dry_run or test_only):
        from slurmkit.errors import InputError, Problem

        raise InputError(Problem("--parsable prints job ids: it does not go with --json, --dry-run or --test-only",
                                 key="--parsable", hint="drop one of them"))
    if dry_run:
        out = []
        for path, name, be, request in _requests(read_specs(specs, overrides), site_path, backend, {}, True):
            command = be.describe(request, test_only=test_only)
            why = be.choice.reason if be.choice else f"backend {be.name}"
            if as_json:
                out.append({"file": path, "name": name, "script": request.script, "command": command,
                            "tag": request.tag, "backend": be.name, "backend_reason": why})
            else:
                echo(f"# {path}: backend {be.name} ({why})")
                echo(f"# {path}: would run: {command}\n")
                echo(request.script)
        if as_json:
            echo_json(out)
        return
    results, _be = submit_specs(specs, site_path, overrides, backend, test_only)
    for item in results:
        if as_json:
            continue
        if parsable:  # like sbatch --parsable: jobid[;cluster], one line per job, nothing else on stdout
            echo(f"{item['job_id']};{item['cluster']}" if item["cluster"] else str(item["job_id"]))
        elif test_only:
            echo(f"{item['file']}: {item['test_only']}")
        else:
            again = " (found the job an earlier attempt created)" if item["reused"] else ""
            echo(f"Submitted {item['name']} as job {item['job_id']}{again}. Follow it: sk logs -f {item['job_id']}")
    if as_json:
        echo_json(results)
