"""`sk status / wait / logs / cancel / history`: follow submitted jobs."""

from __future__ import annotations

import getpass
import re
import sys
import time
from pathlib import Path

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option


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
        return text


JOBID = JobIdType()


def _table(jobs) -> None:
    click.echo(f"{'JOBID':<14} {'NAME':<20} {'USER':<10} {'STATE':<11} {'ELAPSED':>10} {'NODES':<14} REASON/EXIT")
    for j in jobs:
        extra = j.exit_code if j.terminal else j.reason
        click.echo(f"{j.job_id:<14} {j.name[:20]:<20} {j.user:<10} {j.state:<11} {j.elapsed:>10} "
                   f"{j.nodes[:14]:<14} {extra}")


@click.command()
@click.argument("job_ids", nargs=-1, type=JOBID)
@click.option("--me", is_flag=True, help="Only my jobs (default when no JOBID is given).")
@json_option
@handle_errors
def status(job_ids: tuple[str, ...], me: bool, as_json: bool) -> None:
    """Show jobs: the given ids, or your jobs of today.

    \b
    Example:  sk status 1234 1235        sk status --me --json
    """
    from slurmkit.job import from_sacct, lookup

    jobs = [lookup(j) for j in job_ids] if job_ids else from_sacct(user=getpass.getuser())
    if as_json:
        echo_json([j.to_dict() for j in jobs])
    elif not jobs:
        click.echo("no jobs")
    else:
        _table(jobs)


@click.command()
@click.argument("job_id", type=JOBID)
@click.option("--timeout", type=float, default=None, help="Give up after this many seconds (exit 124).")
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between polls.")
@handle_errors
def wait(job_id: str, timeout: float | None, interval: float) -> None:
    """Wait until a job ends; the exit status says how it ended.

    \b
    0 COMPLETED, 3 FAILED, 4 TIMEOUT, 5 CANCELLED, 6 OUT_OF_MEMORY, 7 NODE_FAIL, 8 other, 124 --timeout reached.
    Example:  sk wait 1234 && echo done
    """
    from slurmkit.job import EXIT_BY_STATE, lookup

    start = time.monotonic()
    last = None
    while True:
        job = lookup(job_id)
        if job.state != last:
            click.echo(f"[{time.monotonic() - start:6.0f}s] job {job_id} {job.state} {job.reason}".rstrip(), err=True)
            last = job.state
        if job.terminal:
            sys.exit(EXIT_BY_STATE.get(job.state, 8))
        if timeout is not None and time.monotonic() - start > timeout:
            click.echo(f"job {job_id} still {job.state} after {timeout:.0f}s", err=True)
            sys.exit(124)
        time.sleep(interval)


@click.command()
@click.argument("job_id", type=JOBID)
@click.option("-f", "--follow", is_flag=True, help="Keep printing while the job runs.")
@click.option("--stderr", "which", flag_value="stderr", help="Show the error file instead of the output file.")
@handle_errors
def logs(job_id: str, follow: bool, which: str | None) -> None:
    """Print a job's output file (paths from Slurm).

    \b
    Example:  sk logs -f 1234
    """
    from slurmkit.errors import JobNotFound
    from slurmkit.job import lookup

    job = lookup(job_id)
    path = job.stderr if which == "stderr" else job.stdout
    if not path:
        raise JobNotFound(f"Slurm no longer has the log path of job {job_id}",
                          hint="the controller forgets finished jobs after MinJobAge; look in the job's workdir")
    p = Path(path)
    pos = 0
    while True:
        if p.exists():
            with p.open("rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos += len(chunk)
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        if not follow or job.terminal:
            if not p.exists():
                raise JobNotFound(f"log file {p} does not exist (yet)")
            return
        time.sleep(1)
        job = lookup(job_id)


@click.command()
@click.argument("job_ids", nargs=-1, type=JOBID)
@click.option("--name", help="Cancel my jobs with this name.")
@handle_errors
def cancel(job_ids: tuple[str, ...], name: str | None) -> None:
    """Cancel jobs by id, or by name.

    \b
    Example:  sk cancel 1234      sk cancel --name lr-sweep
    """
    import subprocess

    from slurmkit.errors import InputError

    if not job_ids and not name:
        raise InputError("give job ids or --name NAME")
    argv = ["scancel", *job_ids] + ([f"--name={name}", f"--user={getpass.getuser()}"] if name else [])
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        from slurmkit.errors import BackendError

        raise BackendError(proc.stderr.strip())
    click.echo(f"cancelled {' '.join(job_ids) or 'jobs named ' + repr(name)}")


@click.command()
@click.option("--since", default="now-7days", show_default=True, help="Slurm time, e.g. 2026-11-01 or now-1day.")
@json_option
@handle_errors
def history(since: str, as_json: bool) -> None:
    """Your finished and running jobs from Slurm accounting.

    \b
    Example:  sk history --since 2026-11-01
    """
    from slurmkit.job import from_sacct

    jobs = from_sacct(user=getpass.getuser(), since=since)
    if as_json:
        echo_json([j.to_dict() for j in jobs])
    elif not jobs:
        click.echo(f"no jobs since {since}")
    else:
        _table(jobs)
