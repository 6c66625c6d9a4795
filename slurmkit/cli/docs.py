"""`sk docs build`: the site's user guide (Markdown + mkdocs.yml, and HTML), generated from its site config."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option


@click.group()
def docs() -> None:
    """Documentation generated from the site config (always in step with what sk does there)."""


@docs.command("build")
@click.option("--site", "site_path", metavar="FILE", envvar="SK_SITE", required=True,
              type=click.Path(dir_okay=False), help="Site config to document (or $SK_SITE).")
@click.option("-o", "--output", "out_dir", metavar="DIR", required=True, type=click.Path(file_okay=False),
              help="Output directory: DIR/docs (Markdown), DIR/mkdocs.yml, DIR/site (HTML).")
@click.option("--no-html", is_flag=True, help="Write the Markdown and mkdocs.yml only; do not run mkdocs.")
@click.option("--examples", "examples_dir", metavar="DIR", type=click.Path(file_okay=False, exists=True),
              help="Job specs to render as worked examples (default: slurmkit's examples/).")
@json_option
@handle_errors
def build(site_path: str, out_dir: str, no_html: bool, examples_dir: str | None, as_json: bool) -> None:
    """Write the user guide for a cluster: overview, quickstart, job-spec reference, worked examples rendered by
    the real renderer, why-these-settings pages, troubleshooting with the real messages, admin pages.

    \b
    Example:  sk docs build --site /etc/slurmkit/site.yaml -o /srv/www/gpu-guide
              sk docs build --site site_config/dgx-a100.yaml -o guide --no-html
    The HTML (DIR/site/index.html) needs no network: no web fonts, no CDN; it also opens from the file system.
    """
    from pathlib import Path

    from slurmkit.docs.build import build_guide

    result = build_guide(site_path, out_dir, html=not no_html,
                         examples_dir=Path(examples_dir) if examples_dir else None, command_help=command_help,
                         command_output=command_output)
    if as_json:
        echo_json({"output": str(result.out_dir), "pages": result.pages,
                   "html": str(result.html_dir) if result.html_dir else None,
                   "skipped_examples": result.skipped_examples})
        return
    click.echo(f"wrote {len(result.pages)} pages to {result.out_dir / 'docs'} and {result.out_dir / 'mkdocs.yml'}")
    for name, why in result.skipped_examples.items():
        click.echo(f"example {name} does not fit this site (listed with the reason): {why.splitlines()[0]}")
    if result.html_dir:
        click.echo(f"HTML: {result.html_dir / 'index.html'}")


def command_help(path: list[str]) -> str:
    """`sk <path> --help` as the installed CLI prints it (fixed width, so the guide does not depend on a tty)."""
    from slurmkit.cli.main import cli
    from slurmkit.errors import SlurmkitError

    ctx = click.Context(cli, info_name="sk", terminal_width=100, max_content_width=100)
    cmd: click.Command = cli
    for name in path:
        assert isinstance(cmd, click.Group)
        sub = cmd.get_command(ctx, name)
        if sub is None:
            raise SlurmkitError(f"docs: no command sk {' '.join(path)}")
        cmd = sub
        ctx = click.Context(cmd, info_name=name, parent=ctx, terminal_width=100, max_content_width=100)
    return cmd.get_help(ctx)


def command_output(argv: list[str]) -> str:
    """What `sk <argv>` prints (stdout) at 100 columns, run in-process; a failure raises with its message."""
    from click.testing import CliRunner

    from slurmkit.cli.main import cli
    from slurmkit.errors import SlurmkitError

    res = CliRunner(env={"COLUMNS": "100", "TZ": "UTC"}).invoke(cli, argv, catch_exceptions=False)
    if res.exit_code != 0:
        raise SlurmkitError(f"docs: `sk {' '.join(argv)}` failed (exit {res.exit_code}): "
                            f"{(res.stderr or res.stdout).strip()}")
    return res.stdout
