"""`sk admin reconcile` and `sk admin import-sacct`: bring the store in line with Slurm's accounting database.

The jobcomp hook's record is the richest one (taken from the controller the moment the job ended), but a hook
can be missing (not installed yet, controller crash, record lost) or incomplete (flagged `no-scontrol`, or
`run-uncertain` when the job moved on before the hook ran). sacct is the authority on which runs exist and how
they are numbered (slurmkit/accounting/sacct.py). A store row and a sacct run are the same run when they
started at the same second (or, for a run that never started, ended at the same second): run numbers may
differ, times cannot.

reconcile, for every run sacct lists as ended in the window:
  * no row describes it: insert sacct's record (source `reconcile`);
  * a row under another run number describes it: renumber the row (requeues; `no-scontrol` records, whose run
    was unknown); two rows describe it: keep one, remove the other, so a run is never counted twice;
  * a hook row flagged `no-scontrol` or `run-uncertain`: take the allocation (GPUs, types, TRES, nodes, CPUs)
    from sacct and flag it `reconciled`; a run that never started has no allocation; any other hook row keeps
    its values (only empty columns are filled, a non-final state is corrected): poorer never replaces richer;
  * a row written by reconcile or import-sacct: refreshed from sacct.
  * with `admin_comment` (sites whose node epilogs deliver GPU summaries in the job's AdminComment, kept by
    slurmdbd): the `SK1:` segments sacct returns for runs with GPUs become job_gpus rows when the store has no
    summary of that node and run yet (slurmkit/store/gpus.py upserts them).
import-sacct only inserts runs that no row describes: a history backfill never changes what is there.
Both are idempotent (a second run changes nothing), skip jobs that still have a record in the spool (ingest
delivers it first) and hold the spool's ingest lock while they work, so ingest and reconcile never interleave.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from slurmkit import record
from slurmkit.accounting import sacct, spool
from slurmkit.errors import StoreError
from slurmkit.record import JOB_COLUMNS
from slurmkit.slurm import sacct as sacct_cmd
from slurmkit.store import jobs, rollup
from slurmkit.store.db import Store

KEY = record.JOB_KEY
# Columns sacct can tell; the key, provenance and bookkeeping columns are not compared.
DATA_COLUMNS = tuple(c for c in JOB_COLUMNS if c not in (*KEY, "source", "flags", "ingested_at"))
ALLOCATION = ("gpus", "gpu_types", "tres", "nodes", "node_count", "cpus")
SITE_COLUMNS = ("node_type",)  # named by the site config, not by sacct: never emptied when no site config was read
INCOMPLETE = ("no-scontrol", "run-uncertain")  # hook flags that reconcile resolves from sacct
JOB_ID_CHUNK = 500
DAY = 86400


@dataclass
class Change:
    """One change to the store (or, in a dry run, one that would be made)."""

    action: str  # insert | renumber | remove-duplicate | complete | refresh | fill | gpus
    cluster: str
    job_id: int
    run: int
    detail: str
    from_run: int | None = None
    values: dict = field(default_factory=dict, repr=False)  # columns to write (insert: the whole record)
    expect: tuple = ()  # (source, flags) the row had when planned: an update applies only if still so

    def describe(self) -> str:
        what = f"{self.cluster} job {self.job_id} run {self.run}"
        if self.from_run is not None and self.from_run != self.run:
            what += f" (was run {self.from_run})"
        return f"{self.action:<16} {what}: {self.detail}"


@dataclass
class Result:
    mode: str
    since: int
    until: int | None
    dry_run: bool
    runs: int = 0  # ended runs sacct listed in the window
    unchanged: int = 0
    spooled: int = 0  # runs of jobs skipped because a record of theirs is still in the spool
    conflicts: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.changes:
            out[c.action] = out.get(c.action, 0) + 1
        return out

    def as_dict(self) -> dict:
        return {"mode": self.mode, "since": self.since, "until": self.until, "dry_run": self.dry_run,
                "runs_in_sacct": self.runs, "unchanged": self.unchanged, "skipped_spooled": self.spooled,
                "counts": self.counts(), "conflicts": self.conflicts,
                "changes": [{k: v for k, v in asdict(c).items() if k not in ("values", "expect")}
                            for c in self.changes]}


def _same_run(row: dict, rec: dict) -> bool:
    if rec["start_time"] is not None:
        return row["start_time"] == rec["start_time"]
    return row["start_time"] in (None, rec["end_time"]) and row["end_time"] == rec["end_time"]


def _rank(row: dict, run: int) -> tuple:
    """Which of several rows describing one run to keep: the one already at sacct's number, then the richest."""
    flags = set((row["flags"] or "").split(","))
    return (row["run"] == run, row["source"] == "jobcomp", not flags & set(INCOMPLETE))


def _gpus(rec: dict) -> str:
    return f"{rec['gpus']} x {rec['gpu_types']}" if rec["gpu_types"] else f"{rec['gpus']} GPUs"


def _update(row: dict, rec: dict, mode: str) -> Change | None:
    """The content change (if any) that reconcile makes to `row`, which describes sacct's run `rec`."""
    flags = [f for f in (row["flags"] or "").split(",") if f]
    if row["source"] in ("reconcile", "sacct-import"):
        values = {c: rec[c] for c in DATA_COLUMNS if row[c] != rec[c]
                  and not (c in SITE_COLUMNS and rec[c] is None)}
        action, detail = "refresh", "sacct changed: " + ", ".join(sorted(values))
    else:
        values = {c: rec[c] for c in DATA_COLUMNS if row[c] is None and rec[c] is not None}
        action, detail = "fill", "empty columns from sacct: " + ", ".join(sorted(values))
        if row["state"] not in sacct_cmd.ENDED:  # hooks before the requeue fix wrote PENDING for a requeued run
            values["state"] = rec["state"]
        resolved = [f for f in flags if f in INCOMPLETE]
        never_started = rec["start_time"] is None and rec["nodes"] is None
        if never_started and any(row[c] != rec[c] for c in (*ALLOCATION, "start_time")):
            # Hooks before the fix took a pending job's *requested* TRES from scontrol: it had no allocation.
            values.update({c: rec[c] for c in (*ALLOCATION, "start_time", "elapsed_s") if row[c] != rec[c]})
            action, detail = "complete", "never started: no allocation (sacct has no AllocTRES for it)"
        if resolved:
            values.update({c: rec[c] for c in ALLOCATION if row[c] != rec[c]})
            values["flags"] = ",".join([*(f for f in flags if f not in INCOMPLETE), "reconciled"])
            action, detail = "complete", f"{'+'.join(resolved)} record: allocation from sacct ({_gpus(rec)})"
    if not values:
        return None
    return Change(action, row["cluster"], row["job_id"], rec["run"], detail, values=values,
                  expect=(row["source"], row["flags"]))


def plan_job(rows: list[dict], recs: list[dict], mode: str) -> tuple[list[Change], list[str], int]:
    """(changes, conflicts, unchanged) for one job: its store rows and the ended runs sacct listed for it.

    Structural changes (renumber, remove, insert) are all-or-nothing per job: when one of them would need a run
    number that a row of another run holds, the job's rows stay where they are and the conflict is reported.
    """
    changes: list[Change] = []
    conflicts: list[str] = []
    unchanged = 0
    claimed: dict[int, list[dict]] = {}
    matched: set[int] = set()
    for rec in recs:  # each row describes at most one run
        # Start times have 1 s resolution: a run requeued at once can start in the same second as the next one
        # (seen on the devcluster). Such a tie goes to the run whose number the row already has.
        claimed[rec["run"]] = [r for r in rows if id(r) not in matched and _same_run(r, rec)
                               and not any(o is not rec and o["run"] == r["run"] and _same_run(r, o) for o in recs)]
        matched.update(id(r) for r in claimed[rec["run"]])
    decided: list[tuple[dict, dict, list[dict]]] = []  # (sacct run, row kept for it, duplicate rows)
    missing: list[dict] = []
    for rec in recs:
        cands = claimed[rec["run"]]
        if not cands:
            missing.append(rec)
        elif mode == "import":  # a backfill changes nothing that is there
            unchanged += 1
        else:
            keep = max(cands, key=lambda r: _rank(r, rec["run"]))
            decided.append((rec, keep, [r for r in cands if r is not keep]))
    gone = {id(d) for _, _, dups in decided for d in dups}
    moves = [(rec, keep) for rec, keep, _ in decided if keep["run"] != rec["run"]]
    staying = {r["run"]: r for r in rows if id(r) not in gone and id(r) not in {id(k) for _, k in moves}}
    targets = [rec["run"] for rec, _ in moves]
    where = f"{recs[0]['cluster']} job {recs[0]['job_id']}"
    blocked = sorted({k for k in targets if k in staying or targets.count(k) > 1})
    if blocked:
        starts = [staying[k]["start_time"] for k in blocked if k in staying]
        conflicts.append(f"{where}: sacct's run(s) {blocked} are under other numbers in the store, and those numbers "
                         f"hold rows of other runs (starts {starts}); the job's rows are left where they are")
    taken = set(staying) | (set() if blocked else set(targets))
    for rec, keep, dups in decided:
        k = rec["run"]
        if not blocked:
            for other in dups:
                changes.append(Change("remove-duplicate", other["cluster"], other["job_id"], other["run"],
                                      f"describes the same run as run {keep['run']} ({other['source']} row)",
                                      expect=(other["source"], other["flags"])))
            if keep["run"] != k:
                changes.append(Change("renumber", keep["cluster"], keep["job_id"], k,
                                      f"sacct numbers this run {k} (start {rec['start_time']})", from_run=keep["run"],
                                      expect=(keep["source"], keep["flags"])))
        elif keep["run"] != k:
            continue  # its content update would be for a number it does not get
        update = _update(keep, rec, mode)
        if update:
            changes.append(update)
        elif keep["run"] == k:
            unchanged += 1
    for rec in missing:
        k = rec["run"]
        if blocked or k in taken:
            conflicts.append(f"{where} run {k} (start {rec['start_time']}) is not in the store, and run {k} there "
                             "describes another run" + ("; sk admin reconcile renumbers it" if mode == "import"
                                                        else "; left alone"))
            continue
        taken.add(k)
        changes.append(Change("insert", rec["cluster"], rec["job_id"], k,
                              f"{rec['state']}, {_gpus(rec)}, missing from the store", values=rec))
    return changes, conflicts, unchanged


def plan_gpus(store: Store, recs: list[dict], comments: dict[int, str], result: Result) -> None:
    """Changes that add the node GPU summaries found in AdminComments (`comments`: job id -> text) which the
    store does not have yet (no job_gpus row for that cluster, job, run and node)."""
    from slurmkit.accounting.admin_comment import parse_admin_comment

    wanted = {(r["cluster"], r["job_id"], r["run"]) for r in recs}
    found: dict[tuple, dict] = {}
    for job_id, text in comments.items():
        try:
            segments = parse_admin_comment(text)
        except ValueError as exc:
            result.conflicts.append(f"job {job_id}: {exc}; left alone")
            continue
        for seg in segments:
            reason = record.validate(seg) if record.is_gpus(seg) else f"kind {seg.get('kind')!r}"
            if reason:
                result.conflicts.append(f"job {job_id}: AdminComment segment not usable ({reason}); left alone")
                continue
            key = (seg.get("cluster"), seg.get("job_id"), seg.get("run"), seg.get("node"))
            if key[:3] in wanted and sum(g.get("samples") or 0 for g in seg.get("gpus") or []) >= sum(
                    g.get("samples") or 0 for g in (found.get(key) or {}).get("gpus") or []):
                found[key] = seg
    if not found:
        return
    have = set()
    for cluster in {k[0] for k in found}:
        ids = sorted({k[1] for k in found if k[0] == cluster})
        for i in range(0, len(ids), JOB_ID_CHUNK):
            chunk = ids[i:i + JOB_ID_CHUNK]
            cur = store.execute(f"SELECT DISTINCT cluster, job_id, run, node FROM job_gpus WHERE cluster = ? AND "
                                f"job_id IN ({', '.join('?' for _ in chunk)})", [cluster, *chunk])
            have.update(tuple(r) for r in cur.fetchall())
    store.end_read()
    for key, seg in sorted(found.items()):
        if key not in have:
            result.changes.append(Change("gpus", key[0], key[1], key[2], f"node {key[3]}: {len(seg['gpus'])} GPU "
                                         f"summaries ({seg.get('source')}) from the job's AdminComment",
                                         values=seg))


def spooled_jobs(spool_dir: str | Path | None) -> set[tuple[str, int]]:
    """(cluster, job id) of every job record waiting in the spool (file names job-<cluster>-<id>-<run>-<ns>)."""
    out: set[tuple[str, int]] = set()
    if not spool_dir or not os.path.isdir(spool_dir):
        return out
    try:
        waiting = [p.name for p in spool.pending(spool_dir)]
    except spool.UnsafeSpool as exc:
        raise StoreError(str(exc), hint="nothing was reconciled") from None
    for name in waiting:
        if name.startswith("job-"):
            parts = name[4:-5].rsplit("-", 3)
            if len(parts) == 4 and parts[1].isdigit():
                out.add((parts[0], int(parts[1])))
    return out


@contextlib.contextmanager
def ingest_lock(spool_dir: str | Path | None) -> Iterator[None]:
    """The lock `sk admin ingest` holds (slurmkit/accounting/ingest.py), so reconcile never interleaves with it.
    Opened like ingest opens it (slurmkit/accounting/spool.py): a link or an unsafe spool is refused."""
    fds = []
    try:
        if spool_dir and os.path.isdir(spool_dir):
            try:
                fds.append(spool.open_dir(spool_dir))
                fds.append(spool.lock(fds[0], spool_dir))
            except spool.UnsafeSpool as exc:
                raise StoreError(str(exc), hint="nothing was reconciled") from None
            except OSError:  # a spool we may not write (run as an operator): the guarded updates still hold
                pass
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)


def load_rows(store: Store, keys: list[tuple[str, int]]) -> dict[tuple[str, int], list[dict]]:
    """Store rows of the given (cluster, job id)s."""
    cols = (*KEY, *DATA_COLUMNS, "source", "flags")
    out: dict[tuple[str, int], list[dict]] = {}
    by_cluster: dict[str, list[int]] = {}
    for cluster, job_id in keys:
        by_cluster.setdefault(cluster, []).append(job_id)
    for cluster, ids in by_cluster.items():
        for i in range(0, len(ids), JOB_ID_CHUNK):
            chunk = ids[i:i + JOB_ID_CHUNK]
            cur = store.execute(f"SELECT {', '.join(cols)} FROM jobs WHERE cluster = ? AND job_id IN "
                                f"({', '.join('?' for _ in chunk)})", [cluster, *chunk])
            for values in cur.fetchall():
                row = dict(zip(cols, values, strict=True))
                out.setdefault((row["cluster"], row["job_id"]), []).append(row)
    store.end_read()
    return out


def plan(store: Store, recs: list[dict], mode: str, spooled: set[tuple[str, int]], result: Result) -> None:
    """Add to `result` the changes that bring the store in line with `recs` (sacct's ended runs)."""
    by_job: dict[tuple[str, int], list[dict]] = {}
    for rec in recs:
        by_job.setdefault((rec["cluster"], rec["job_id"]), []).append(rec)
    result.runs += len(recs)
    rows = load_rows(store, [k for k in by_job if k not in spooled])
    for key, job_recs in by_job.items():
        if key in spooled:
            result.spooled += len(job_recs)
            continue
        changes, conflicts, unchanged = plan_job(rows.get(key, []), job_recs, mode)
        result.changes += changes
        result.conflicts += conflicts
        result.unchanged += unchanged


def apply(store: Store, changes: list[Change], source: str) -> list[str]:
    """Make `changes` in one transaction. Returns what could not be applied because the row changed since it was
    planned (ingest is locked out, but an ingest of another spool or a hand edit is not)."""
    stale = []
    now = int(time.time())
    insert_sql = jobs.insert_new_sql()
    guard = "cluster = ? AND job_id = ? AND run = ? AND source = ? AND COALESCE(flags, '') = ?"
    touched = {(c.cluster, c.job_id) for c in changes}
    with store.transaction():
        rollup.mark(store, touched)  # the usage rollup's days of these jobs' runs, before and after the changes
        renumbers = [c for c in changes if c.action == "renumber"]
        for c in changes:
            if c.action == "remove-duplicate":
                cur = store.execute(f"DELETE FROM jobs WHERE {guard}",
                                    (c.cluster, c.job_id, c.run, c.expect[0], c.expect[1] or ""))
                if cur.rowcount != 1:
                    stale.append(c.describe())
        # Two steps through negative numbers, so that swapping two runs never collides on the primary key.
        for c in renumbers:
            cur = store.execute(f"UPDATE jobs SET run = ? WHERE {guard}",
                                (-1 - c.run, c.cluster, c.job_id, c.from_run, c.expect[0], c.expect[1] or ""))
            if cur.rowcount != 1:
                stale.append(c.describe())
        for c in renumbers:
            store.execute("UPDATE jobs SET run = ? WHERE cluster = ? AND job_id = ? AND run = ?",
                          (c.run, c.cluster, c.job_id, -1 - c.run))
        for c in changes:
            if c.action == "insert":
                rec = {**c.values, "source": source, "flags": None, "ingested_at": now}
                cur = store.execute(insert_sql, jobs.row(rec))
                if cur.rowcount != 1:
                    stale.append(c.describe())
            elif c.action in ("complete", "refresh", "fill"):
                cols = sorted(c.values)
                cur = store.execute(f"UPDATE jobs SET {', '.join(f'{col} = ?' for col in cols)} WHERE {guard}",
                                    (*(c.values[col] for col in cols), c.cluster, c.job_id, c.run,
                                     c.expect[0], c.expect[1] or ""))
                if cur.rowcount != 1:
                    stale.append(c.describe())
        rollup.mark(store, touched)
    return stale


def slices(since: int, until: int, chunk_s: int) -> list[tuple[int, int]]:
    """[since, until) in pieces of chunk_s; a tail shorter than a minute (or a tenth of a piece) joins the last."""
    out, t = [], since
    while t < until:
        end = until if until - (t + chunk_s) < min(60, chunk_s // 10) else t + chunk_s
        out.append((t, end))
        t = end
    return out


def reconcile(store: Store, since: int, until: int | None = None, *, mode: str = "reconcile",
              spool_dir: str | Path | None = None, cluster: str | None = None, dry_run: bool = False,
              chunk_s: int = DAY, progress: Callable[[str], None] | None = None, admin_comment: bool = False,
              fetch: Callable[..., list[dict]] = sacct.fetch_records,
              comments: Callable[..., dict[int, str]] = sacct_cmd.admin_comments,
              node_types: dict[str, str] | None = None) -> Result:
    """Reconcile (mode "reconcile") or backfill (mode "import") the runs that ended in [since, until).

    The window is read from sacct in slices of `chunk_s` (one sacct call each, so a year-long import neither
    holds a year of rows in memory nor goes silent); each slice is planned and applied in one transaction.
    `node_types` (the site's partition -> node type map) names each sacct run's node_type, as ingest does.
    """
    if mode not in ("reconcile", "import"):
        raise ValueError(f"mode must be reconcile or import, not {mode!r}")
    source = "reconcile" if mode == "reconcile" else "sacct-import"
    stop = int(time.time()) if until is None else until
    result = Result(mode, since, until, dry_run)
    parts = slices(since, stop, chunk_s)
    for i, (a, b) in enumerate(parts, 1):
        recs = fetch(a, None if (until is None and b == stop) else b, cluster=cluster, source=source)
        for rec in recs:
            rec["node_type"] = (node_types or {}).get(rec["partition"] or "")
        gpu_jobs = [r["job_id"] for r in recs if r["gpus"]] if admin_comment and mode == "reconcile" else []
        texts = comments(gpu_jobs, cluster=cluster) if gpu_jobs else {}
        before = len(result.changes)
        # The lock is held per slice, not for a whole import: ingest must not wait hours for it.
        with ingest_lock(None if dry_run else spool_dir):
            spooled = spooled_jobs(spool_dir)
            plan(store, recs, mode, spooled, result)
            if texts:
                plan_gpus(store, [r for r in recs if (r["cluster"], r["job_id"]) not in spooled], texts, result)
            new = result.changes[before:]
            if new and not dry_run:
                for line in apply(store, [c for c in new if c.action != "gpus"], source):
                    result.conflicts.append(f"changed while reconciling, left alone: {line}")
                node_recs = [c.values for c in new if c.action == "gpus"]
                if node_recs:
                    from slurmkit.store import gpus

                    gpus.upsert(store, node_recs)
                rollup.refresh(store)
        if progress and (len(parts) > 1 or recs):
            progress(f"{mode}: {time.strftime('%Y-%m-%d %H:%M', time.localtime(a))} .. "
                     f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(b))}: {len(recs)} runs in sacct, "
                     f"{len(new)} {'changes planned' if dry_run else 'changes'} ({i}/{len(parts)})")
    return result
