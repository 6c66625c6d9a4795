"""`sk status / wait / logs / cancel / history`: follow submitted jobs, through the chosen backend.

Every command asks the backend (`--backend`, the site's `backend:`, else auto-detect: the same choice as
`sk submit`), so a host with only slurmrestd can follow its jobs too. What the backend could not show (e.g.
finished jobs with accounting storage off) is said on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from slurmkit.cli.common import JOBID, backend_option, echo_json, handle_errors, json_option, site_option
from slurmkit.config.when import FORMS
from slurmkit.quoting import for_terminal

if TYPE_CHECKING:
    from slurmkit.backends.base import Backend
    from slurmkit.job import JobInfo




def _backend(site_path: str | None, name: str | None) -> Backend:
    """The backend `sk submit` would use here: a site config is optional for following jobs, but one named by
    --site or $SK_SITE must load."""
    from slurmkit import inputs
    from slurmkit.backends import get_backend
    from slurmkit.site.lookup import find_site_file_if_any

    path = find_site_file_if_any(site_path)
    return get_backend(name, inputs.load_site(path) if path else None)


def _since(text: str) -> int:
    from slurmkit.config.when import to_epoch

    return to_epoch(text, option="--since")


def _notes(be: Backend) -> None:
    for note in be.limitations:
        click.echo(f"note: {note}", err=True)


def _summary(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {state}" for state, n in counts.items())


_HEADER = (f"{'JOBID':<16} {'NAME':<20} {'USER':<10} {'STATE':<11} {'PARTITION':<10} {'GPUS':>4} "
           f"{'ELAPSED':>10} {'LEFT':>10} {'NODES':<14} REASON/EXIT")


def _line(job_id: str, j: JobInfo, state: str, extra: str) -> str:
    t = for_terminal  # a job name or pending reason may hold ESC, BEL or CR
    gpus = "" if j.gpus is None else str(j.gpus)
    left = j.time_left if not j.terminal else ""
    return (f"{job_id:<16} {t(j.name)[:20]:<20} {t(j.user)[:10]:<10} {state:<11} {t(j.partition)[:10]:<10} "
            f"{gpus:>4} {j.elapsed:>10} {left:>10} {t(j.nodes)[:14]:<14} {t(extra)}")


def _rows(jobs: list[JobInfo], expand: bool) -> Iterable[str]:
    """One line per job; an array is one line with its tasks per state unless `expand`."""
    from slurmkit.job import state_counts

    groups: dict[str, list[JobInfo]] = {}
    for j in jobs:
        groups.setdefault(j.unit if not expand else j.job_id, []).append(j)
    for unit, members in groups.items():
        first = members[0]
        if len(members) == 1 and (expand or not first.array_job_id):
            extra = first.exit_code if first.terminal else first.reason or (
                f"expected start {first.start_time}" if first.state == "PENDING" and first.start_time else "")
            yield _line(first.job_id, first, first.state, extra)
            continue
        counts = state_counts(members)
        live = next((m for m in members if not m.terminal), first)
        yield _line(f"{unit} (array)", live, live.state if len(counts) == 1 else "MIXED",
                    f"{sum(counts.values())} tasks: {_summary(counts)}")


def _live_first(jobs: list[JobInfo]) -> list[JobInfo]:
    return sorted(jobs, key=lambda j: j.terminal)  # stable: queued/running first, each in Slurm's order


@click.command()
@click.argument("job_ids", nargs=-1, type=JOBID)
@click.option("--all-users", is_flag=True, help="Every user's jobs that Slurm lets you see.")
@click.option("--since", default="1d", show_default=True,
              metavar="WHEN",
              help=f"Finished jobs that ended since (local time): {FORMS}.")
@click.option("--expand", is_flag=True, help="One line per array task instead of one per array.")
@backend_option
@site_option
@json_option
@handle_errors
def status(job_ids: tuple[str, ...], all_users: bool, since: str, expand: bool, backend: str | None,
           site_path: str | None, as_json: bool) -> None:
    """Show jobs: the given ids, or your queued and running jobs, then those finished recently.

    \b
    Example:  sk status 1234 1235        sk status --since 2d --json        sk status --all-users
    Exit status: 1 when a given id is unknown to Slurm.
    """
    from slurmkit.backends.base import JobQuery
    from slurmkit.errors import JobNotFound

    ended_since = _since(since)  # a bad --since is a usage error before any site or Slurm is read
    be = _backend(site_path, backend)
    missing = []
    if job_ids:
        jobs = []
        for job_id in job_ids:  # in the order given
            found = be.job(job_id)
            jobs += found
            missing += [] if found else [job_id]
    else:
        jobs = _live_first(be.jobs(JobQuery(user="*" if all_users else None, since=ended_since)))
    if as_json:
        echo_json([j.to_dict() for j in jobs])
    elif jobs:
        click.echo(_HEADER)
        for row in _rows(jobs, expand):
            click.echo(row)
    elif not missing:
        click.echo("no jobs" + ("" if job_ids else f" queued, running or finished in the last {since}"))
    _notes(be)
    if missing:
        raise JobNotFound(f"Slurm knows no job {', '.join(missing)}", hint="see your jobs with: sk status")


def _wait_line(job_id: str, tasks: list[JobInfo], elapsed: float) -> str:
    from slurmkit.job import state_counts

    if len(tasks) == 1 and not tasks[0].array_job_id:
        j = tasks[0]
        reason = f" ({j.reason})" if j.reason and not j.terminal else ""
        return f"[{elapsed:6.0f}s] job {job_id} {j.state}{reason}"
    return f"[{elapsed:6.0f}s] array {job_id}: {_summary(state_counts(tasks))}"


@click.command()
@click.argument("job_id", type=JOBID)
@click.option("--timeout", type=float, default=None, help="Give up after this many seconds (exit 124).")
@click.option("--interval", type=float, default=2.0, show_default=True, help="Seconds between polls.")
@backend_option
@site_option
@handle_errors
def wait(job_id: str, timeout: float | None, interval: float, backend: str | None, site_path: str | None) -> None:
    """Wait until a job (every task of an array) ends; the exit status says how it ended.

    \b
    0 COMPLETED (an array: every task), 3 FAILED, 4 TIMEOUT, 5 CANCELLED, 6 OUT_OF_MEMORY, 7 NODE_FAIL,
    8 other, 9 it can never start by itself (DependencyNeverSatisfied, held), 124 --timeout reached.
    For an array, the worst task decides (FAILED before CANCELLED).
    Example:  sk wait 1234 && echo done
    """
    from slurmkit.errors import JobNotFound
    from slurmkit.job import EXIT_STUCK, state_counts, stuck, wait_exit

    be = _backend(site_path, backend)
    start = time.monotonic()
    last = None
    while True:
        tasks = be.job(job_id)
        if not tasks:
            raise JobNotFound(f"Slurm knows no job {job_id}", hint="see your jobs with: sk status")
        line = _wait_line(job_id, tasks, time.monotonic() - start)
        if line.split("] ", 1)[1] != last:
            click.echo(line, err=True)
            last = line.split("] ", 1)[1]
        if all(j.terminal for j in tasks):
            failed = [j.job_id for j in tasks if j.state != "COMPLETED"]
            if len(tasks) > 1 and failed:
                click.echo(f"array {job_id}: {_summary(state_counts(tasks))}; not completed: "
                           f"{', '.join(failed)}", err=True)
            sys.exit(wait_exit(tasks))
        why = stuck(tasks)
        if why:
            click.echo(f"job {job_id} will not start by itself: {why}", err=True)
            sys.exit(EXIT_STUCK)
        if timeout is not None and time.monotonic() - start > timeout:
            click.echo(f"job {job_id} still {_summary(state_counts(tasks))} after {timeout:.0f}s", err=True)
            sys.exit(124)
        time.sleep(interval)


def _pick(job_id: str, tasks: list[JobInfo], task: int | None) -> JobInfo:
    from slurmkit.errors import InputError, JobNotFound

    if task is not None:
        wanted = [j for j in tasks if j.array_task == str(task)]
        if not wanted:
            raise JobNotFound(f"job {job_id} has no task {task} that Slurm still knows",
                              hint="tasks: " + ", ".join(f"{j.job_id} ({j.state})" for j in tasks))
        return wanted[0]
    if len(tasks) == 1:
        return tasks[0]
    raise InputError(f"job {job_id} is an array of {len(tasks)} records: "
                     + ", ".join(f"{j.job_id} ({j.state})" for j in tasks),
                     hint=f"pick one: sk logs {job_id} --task N")


@click.command()
@click.argument("job_id", type=JOBID)
@click.option("-f", "--follow", is_flag=True, help="Keep printing while the job runs.")
@click.option("--stderr", "which", flag_value="stderr", help="Show the error file instead of the output file.")
@click.option("--task", type=int, default=None, help="The array task whose log to show.")
@backend_option
@site_option
@handle_errors
def logs(job_id: str, follow: bool, which: str | None, task: int | None, backend: str | None,
         site_path: str | None) -> None:
    """Print a job's output file (its path as the backend reports it).

    \b
    Example:  sk logs -f 1234        sk logs 1234 --task 3
    """
    from slurmkit.errors import JobNotFound

    be = _backend(site_path, backend)

    def lookup() -> JobInfo:
        tasks = be.job(job_id)
        if not tasks:
            raise JobNotFound(f"Slurm knows no job {job_id}", hint="see your jobs with: sk status")
        return _pick(job_id, tasks, task)

    job = lookup()
    path = job.stderr if which == "stderr" else job.stdout
    if not path:
        raise JobNotFound(f"the {be.name} backend does not know the log path of job {job.job_id}",
                          hint="the controller forgets finished jobs after MinJobAge; look in the job's workdir"
                          + (f" ({job.workdir})" if job.workdir else ""))
    p = Path(path)
    pos = 0
    said_pending = False
    while True:
        if p.exists():
            with p.open("rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
                pos += len(chunk)
                sys.stdout.write(chunk.decode(errors="replace"))
                sys.stdout.flush()
        elif follow and job.state == "PENDING" and not said_pending:
            click.echo(f"job {job.job_id} is pending ({job.reason or 'no reason given'}); waiting for it to "
                       "start", err=True)
            said_pending = True
        if not follow or job.terminal:
            if not p.exists():
                raise JobNotFound(f"log file {p} does not exist (yet)")
            return
        time.sleep(1)
        job = lookup()


_SAID = {"cancelled": "cancelled", "signalled": "signalled", "not-found": "not found",
         "already-ended": "not cancelled", "refused": "refused"}


@click.command()
@click.argument("job_ids", nargs=-1, type=JOBID)
@click.option("--name", help="Cancel my queued and running jobs with this name.")
@backend_option
@site_option
@json_option
@handle_errors
def cancel(job_ids: tuple[str, ...], name: str | None, backend: str | None, site_path: str | None,
           as_json: bool) -> None:
    """Cancel jobs by id, or by name.

    \b
    Example:  sk cancel 1234      sk cancel --name lr-sweep
    Exit status: 0 when every job was cancelled; 1 when any id is unknown to Slurm, had already ended or was
    refused (each is said), or --name matched no queued or running job of yours.
    """
    from slurmkit.backends.base import JobQuery
    from slurmkit.errors import InputError, JobNotFound

    if not job_ids and not name:
        raise InputError("give job ids or --name NAME")
    be = _backend(site_path, backend)
    ids = list(job_ids)
    if name:
        named = list(dict.fromkeys(j.unit for j in be.jobs(JobQuery(name=name, finished=False))))
        if not named:
            raise JobNotFound(f"no queued or running job of yours is named {name!r}",
                              hint="see your jobs with: sk status")
        ids += [i for i in named if i not in ids]
    results = be.cancel(ids)
    if as_json:
        echo_json([{"job_id": r.job_id, "outcome": r.outcome, "message": r.message} for r in results])
    else:
        for r in results:
            text = f"{_SAID[r.outcome]} {r.job_id}" + (f": {r.message}" if r.message else "")
            click.echo(text, err=not r.ok)
    if not all(r.ok for r in results):
        sys.exit(1)


@click.command()
@click.option("--since", default="7d", show_default=True,
              metavar="WHEN",
              help=f"Jobs that ended since (local time): {FORMS}.")
@backend_option
@site_option
@json_option
@handle_errors
def history(since: str, backend: str | None, site_path: str | None, as_json: bool) -> None:
    """Your queued, running and finished jobs (finished ones from Slurm accounting where the backend reads it).

    \b
    Example:  sk history --since 2026-11-01
    """
    from slurmkit.backends.base import JobQuery

    ended_since = _since(since)
    be = _backend(site_path, backend)
    jobs = _live_first(be.jobs(JobQuery(since=ended_since)))
    if as_json:
        echo_json([j.to_dict() for j in jobs])
    elif not jobs:
        click.echo(f"no jobs since {since}")
    else:
        click.echo(_HEADER)
        for row in _rows(jobs, expand=True):
            click.echo(row)
    _notes(be)
