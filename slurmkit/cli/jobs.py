"""`sk validate`, `sk render`, `sk submit`, `sk templates`: the click commands; what they do is in actions.py.

`sk render|submit|validate` in their plain forms skip click altogether (fast.py); these commands are what
handles everything else (help, completion, usage errors) and what the fast path must agree with.
"""

from __future__ import annotations

import sys

import click

from slurmkit.cli import actions
from slurmkit.cli.common import backend_option, handle_errors, json_option, site_option

set_option = click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                          help="Override a spec key (highest precedence), e.g. --set nodes=4 --set nccl.debug=INFO.")


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
    actions.validate(specs, site_path, overrides, as_json)


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
    actions.render(spec, output, site_path, overrides, explain)


@click.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@site_option
@set_option
@backend_option
@click.option("--dry-run", is_flag=True, help="Print the script and the exact submission; submit nothing.")
@click.option("--test-only", is_flag=True, help="Ask Slurm when and where the job would start (sbatch --test-only).")
@click.option("--parsable", is_flag=True,
              help="Print only jobid[;cluster] per job, like sbatch --parsable: jobid=$(sk submit --parsable x.yaml)")
@json_option
@handle_errors
def submit(specs: tuple[str, ...], site_path: str | None, overrides: tuple[str, ...], backend: str | None,
           dry_run: bool, test_only: bool, parsable: bool, as_json: bool) -> None:
    """Render job specs and submit them to Slurm.

    Several specs may be given; a spec whose `dependency` names another spec's `name` is submitted after it
    with that job's id. Each submission carries a tag in its job comment, so a retry after a timeout finds the
    job it already created instead of submitting it twice.

    \b
    Example:  sk submit train.yaml
              sk submit preprocess.yaml train.yaml      # train.yaml: dependency: {afterok: [preprocess]}
              sk submit train.yaml --dry-run
              jobid=$(sk submit --parsable train.yaml)
    """
    actions.submit(specs, site_path, overrides, backend, dry_run, test_only, as_json, parsable)


@click.command()
@site_option
@click.option("--show", metavar="NAME", help="Print one template's source.")
@handle_errors
def templates(site_path: str | None, show: str | None) -> None:
    """List the job templates (built-in, a launcher's own, the site's overrides from its templates_dir), then
    the launchers (built-in and installed from the `slurmkit.launchers` entry-point group) with what each does.

    \b
    Example:  sk templates --show launchers/torchrun.sh.j2
    """
    import textwrap

    from slurmkit.launchers import all_launchers
    from slurmkit.render import list_templates, template_dirs
    from slurmkit.site.model import find_site_file, load_site

    site_dir = None
    try:
        site = load_site(find_site_file(site_path))
        site_dir = site.resolve_path(site.templates_dir) if site.templates_dir else None
    except Exception:
        if site_path:
            raise
    launchers = all_launchers()
    if show:
        for base in template_dirs(site_dir, launchers):
            if (base / show).is_file():
                sys.stdout.write((base / show).read_text())
                return
        from slurmkit.errors import InputError

        raise InputError(f"no template named {show!r}", hint="run `sk templates` for the list")
    for name, where in list_templates(site_dir, launchers):
        click.echo(f"{name:<32} {where}")
    click.echo("\nlaunchers (the job spec's `launcher:`):")
    for la in launchers:
        click.echo(f"  {la.name:<12} {la.summary} [template {la.template}]")
        click.echo(textwrap.fill(la.explanation, 110, initial_indent=" " * 15, subsequent_indent=" " * 15))
