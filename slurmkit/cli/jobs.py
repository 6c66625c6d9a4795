"""`sk validate`, `sk render`, `sk submit`, `sk templates`: spec -> plan -> script -> backend.

Heavy modules are imported inside the commands so `sk render` pays only for what it uses.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option

set_option = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                          help="Override a spec key (highest precedence), e.g. --set nodes=4 --set nccl.debug=INFO.")


def _plan(path: str, site_path: str | None, overrides: tuple[str, ...], deps: dict[str, int] | None = None):
    from slurmkit.plan import make_plan
    from slurmkit.site import resolve_site
    from slurmkit.spec import load_spec

    site = resolve_site(site_path)
    spec, src = load_spec(path, list(overrides))
    return make_plan(spec, site, src, deps)


def _warn(plan) -> None:
    for w in plan.warnings:
        click.echo(w.format(), err=True)


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@site_option
@set_option
@json_option
@handle_errors
def validate(specs: tuple[str, ...], site_path: str | None, overrides: tuple[str, ...], as_json: bool) -> None:
    """Check job specs against the site config, without rendering or submitting.

    \b
    Example:  sk validate train.yaml --site site_config/dgx-a100.yaml
    Exit status: 0 valid (warnings on stderr), 2 invalid (every problem listed with file:line: key).
    """
    from slurmkit.render import plan_summary

    results = []
    for path in specs:
        plan = _plan(path, site_path, overrides, _placeholder_deps(path))
        _warn(plan)
        results.append({"file": path, **plan_summary(plan)})
        if not as_json:
            click.echo(f"{path}: ok ({plan.recipe}: {plan.spec.nodes} node(s) x {plan.gpus_per_node} "
                       f"{plan.sbatch['gpus-per-node'].split(':')[0]} GPU(s), partition {plan.partition_name})")
    if as_json:
        echo_json(results)


def _placeholder_deps(path: str) -> dict[str, int]:
    """For validate/render alone, dependencies on specs by name get a stand-in id (0) so the rest is checked."""
    from slurmkit.yamlsrc import load

    return dict.fromkeys(_dependency_names(load(path).data), 0)


def _dependency_names(data: dict) -> set[str]:
    """Names of other specs that a spec's `dependency` refers to (job ids excluded)."""
    deps = data.get("dependency") or {}
    if not isinstance(deps, dict):
        return set()
    return {r for refs in deps.values() if isinstance(refs, list) for r in refs
            if isinstance(r, str) and not r.isdigit()}


@click.command()
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write the script here.")
@site_option
@set_option
@click.option("--explain", is_flag=True, help="Print the planner's decisions (JSON) instead of the script.")
@handle_errors
def render(spec: str, output: str | None, site_path: str | None, overrides: tuple[str, ...], explain: bool) -> None:
    """Print the sbatch script a job spec becomes on this site (nothing is submitted).

    \b
    Example:  sk render examples/torchrun-2node.yaml --site site_config/dgx-a100.yaml
              sk render train.yaml --set nodes=4 -o train.sbatch
    """
    from slurmkit.render import plan_summary
    from slurmkit.render import render as render_script

    plan = _plan(spec, site_path, overrides, _placeholder_deps(spec))
    _warn(plan)
    if explain:
        echo_json(plan_summary(plan))
        return
    script = render_script(plan)
    if output:
        Path(output).write_text(script)
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(script)


def _order(specs: tuple[str, ...]) -> list[tuple[str, str]]:
    """(path, job name) in an order where a spec comes after the specs it depends on by name."""
    from slurmkit.errors import Problem, SpecError
    from slurmkit.yamlsrc import load

    info = {}
    for path in specs:
        data = load(path).data
        info[path] = (str(data.get("name", path)), _dependency_names(data))
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


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@site_option
@set_option
@click.option("--backend", type=click.Choice(["auto", "cli", "rest", "pyslurm"]), default=None,
              help="How to talk to Slurm (default: the site config's backend, else auto-detect).")
@click.option("--dry-run", is_flag=True, help="Print the script and the exact submission; submit nothing.")
@click.option("--test-only", is_flag=True, help="Ask Slurm when and where the job would start (sbatch --test-only).")
@json_option
@handle_errors
def submit(specs: tuple[str, ...], site_path: str | None, overrides: tuple[str, ...], backend: str | None,
           dry_run: bool, test_only: bool, as_json: bool) -> None:
    """Render job specs and submit them to Slurm.

    Several specs may be given; a spec whose `dependency` names another spec's `name` is submitted after it
    with that job's id. Each submission carries a tag in its job comment, so a retry after a timeout finds the
    job it already created instead of submitting it twice.

    \b
    Example:  sk submit train.yaml
              sk submit preprocess.yaml train.yaml      # train.yaml: dependency: {afterok: [preprocess]}
              sk submit train.yaml --dry-run
    """
    from slurmkit.render import build_request
    from slurmkit.render import render as render_script

    resolved: dict[str, int] = {}
    out = []
    be = None
    for path, name in _order(specs):
        plan = _plan(path, site_path, overrides, resolved if not dry_run else {**_placeholder_deps(path),
                                                                                    **resolved})
        _warn(plan)
        request = build_request(plan, render_script(plan))
        if be is None and not dry_run:
            from slurmkit.backends import get_backend

            be = get_backend(backend, plan.site)
        if dry_run:
            from slurmkit.backends import describe_submission

            command = describe_submission(backend or plan.site.backend, request, test_only=test_only)
            if as_json:
                out.append({"file": path, "name": name, "script": request.script, "command": command,
                            "tag": request.tag})
            else:
                click.echo(f"# {path}: would run: {command}\n")
                click.echo(request.script)
            continue
        from slurmkit.submission import submit as submit_request

        result = submit_request(be, request, test_only=test_only)
        if result.job_id:
            resolved[name] = result.job_id
        item = {"file": path, "name": name, "job_id": result.job_id, "cluster": result.cluster,
                "backend": result.backend, "reused": result.reused, "tag": request.tag}
        if test_only:
            item["test_only"] = result.test_only
        out.append(item)
        if not as_json:
            if test_only:
                click.echo(f"{path}: {result.test_only}")
            else:
                again = " (found the job an earlier attempt created)" if result.reused else ""
                click.echo(f"Submitted {name} as job {result.job_id}{again}. Follow it: sk logs -f {result.job_id}")
    if as_json:
        echo_json(out)


@click.command()
@site_option
@click.option("--show", metavar="NAME", help="Print one template's source.")
@handle_errors
def templates(site_path: str | None, show: str | None) -> None:
    """List the job templates (built-in, and the site's overrides from its templates_dir).

    \b
    Example:  sk templates --show launchers/torchrun.sh.j2
    """
    from slurmkit.render import TEMPLATES_DIR, list_templates
    from slurmkit.site import find_site_file, load_site

    site_dir = None
    try:
        site = load_site(find_site_file(site_path))
        site_dir = site.resolve_path(site.templates_dir) if site.templates_dir else None
    except Exception:
        if site_path:
            raise
    if show:
        for base in [site_dir, TEMPLATES_DIR]:
            if base and (base / show).is_file():
                sys.stdout.write((base / show).read_text())
                return
        from slurmkit.errors import InputError

        raise InputError(f"no template named {show!r}", hint="run `sk templates` for the list")
    for name, where in list_templates(site_dir):
        click.echo(f"{name:<32} {where}")
