"""Options and output helpers shared by the command modules (the output helpers live in output.py, free of click)."""

from __future__ import annotations

import re

import click

from slurmkit.cli.output import echo_json, handle_errors
from slurmkit.slurm.fields import MAX_JOB_ID

__all__ = ["JOBID", "backend_option", "echo_json", "handle_errors", "json_option", "site_option"]

site_option = click.option(
    "--site", "site_path", metavar="FILE", envvar="SK_SITE",
    help="Site config (default: $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml).")

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")


def _complete_backend(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from slurmkit.backends import names

    return [n for n in names() if n.startswith(incomplete)]


# A plain name, checked against the registry (built-ins + slurmkit.backends entry points) when the backend is
# built: a click.Choice would fix the list and need the entry points scanned on every start.
backend_option = click.option(
    "--backend", metavar="NAME", default=None, shell_complete=_complete_backend,
    help="How to talk to Slurm: auto, cli, rest, pyslurm or an installed backend "
         "(default: the site config's backend, else auto-detect).")


class JobIdType(click.ParamType):
    """A Slurm job id as sacct/scontrol/scancel take it: 1234, an array task 1234_7 (scancel also takes
    1234_[1-5]), or a het-job component 1234+1. Checked here so a typo is a usage error (exit 2), not a
    Slurm error message passed through."""

    name = "JOBID"
    _FORM = re.compile(r"^\d+(?:_(?:\d+|\[[\d,%-]+\])|\+\d+)?$")

    def convert(self, value, param, ctx):  # type: ignore[no-untyped-def]
        text = str(value).strip()
        if not self._FORM.match(text):
            self.fail(f"{value!r} is not a Slurm job id (expected e.g. 1234, 1234_7 or 1234+1; "
                      "`sk status` lists your jobs)", param, ctx)
        if not 1 <= int(re.match(r"\d+", text).group()) <= MAX_JOB_ID:  # type: ignore[union-attr]
            self.fail(f"{value!r} is not a Slurm job id (1 to {MAX_JOB_ID})", param, ctx)
        return text


JOBID = JobIdType()
