"""Helpers for the accounting integration tests (tests/integration/test_accounting_*.py) on the devcluster.

Jobs carry a per-run unique name (other helpers submit jobs at the same time). The devcluster's jobcomp hook
writes into the shared spool, which anyone may ingest into the shared store at any moment: a job's hook records
are therefore collected the way the site flow delivers them (`sk admin ingest` on the devcluster's site config,
then the shared store), never by racing for spool files. Tests that change data work on private stores.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from slurmkit.accounting import sacct, spool
from slurmkit.record import JOB_COLUMNS
from slurmkit.site.model import load_site
from slurmkit.slurm import sacct as sacct_cmd

ROOT = Path(__file__).resolve().parents[2]
SK = str(Path(sys.executable).parent / "sk")
DEVSITE = str(ROOT / "site_config" / "devcluster.yaml")
DC_DIR = Path(os.environ.get("DEVCLUSTER_DIR", "/run/slurmkit-devcluster"))
SHARED_STORE = load_site(DEVSITE).accounting.store
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}
# What the hook and sacct must agree on for every run.
COMPARED = ("state", "gpus", "gpu_types", "node_count", "nodes", "cpus", "start_time", "end_time", "submit_time",
            "exit_code", "array_job_id", "array_task_id", "user_name", "account", "partition")


def tag(what: str) -> str:
    return f"skacct-{what}-{uuid.uuid4().hex[:8]}"


def sbatch(*args: str, name: str) -> int:
    out = subprocess.run(["sbatch", "--parsable", "-J", name, "-o", "/dev/null", "--chdir", "/tmp", *args],
                         check=True, capture_output=True, text=True).stdout
    return int(out.strip().split(";")[0])


def sacct_runs(job_ids: list[int], timeout: float = 30) -> list[dict]:
    """Every ended run of these jobs as sacct reports them (all time, one record per run). slurmdbd completes
    a job's row asynchronously (right after the end, Partition can still be empty): wait until it has."""
    deadline = time.monotonic() + timeout
    while True:
        rows = sacct_cmd.parse(sacct_cmd.run_sacct(sacct_cmd.sacct_command(job_ids=job_ids)))
        runs = [r for r in sacct.number_runs(rows, "sacct") if sacct.ended(r)]
        if all(r["partition"] and r["account"] for r in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(1)


def states(job_ids: list[int]) -> dict[int, str]:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-a", "-j", ",".join(map(str, job_ids)), "-o", "JobIDRaw,State"],
                         capture_output=True, text=True, check=True).stdout
    return {int(line.split("|")[0]): line.split("|")[1].split()[0] for line in out.splitlines() if "|" in line}


def wait_final(job_ids: list[int], timeout: float = 240, tick=None) -> dict[int, str]:
    """Wait until every job (an array: every task, listed under its own id) is in a final state; `tick()` runs
    on every poll."""
    deadline = time.monotonic() + timeout
    while True:
        if tick:
            tick()
        got = states(job_ids)
        # squeue too: slurmdbd learns of array tasks asynchronously, so sacct can briefly show only finished ones
        queued = subprocess.run(["squeue", "-h", "-j", ",".join(map(str, job_ids)), "-o", "%i"],
                                capture_output=True, text=True).stdout.strip()
        if set(job_ids) <= set(got) and all(s in FINAL for s in got.values()) and not queued:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs not finished after {timeout:.0f} s: {got}")
        time.sleep(1)


def ingest_shared() -> None:
    subprocess.run([SK, "admin", "ingest", "--site", DEVSITE, "--json"], check=True, capture_output=True)


def shared_rows(job_ids: list[int]) -> list[dict]:
    with sqlite3.connect(f"file:{SHARED_STORE}?mode=ro", uri=True) as conn:
        cur = conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE cluster = 'devcluster' AND job_id IN "
                           f"({', '.join('?' for _ in job_ids)}) ORDER BY job_id, run", job_ids)
        return [dict(zip(JOB_COLUMNS, r, strict=True)) for r in cur.fetchall()]


def hook_rows(runs: list[dict], timeout: float = 90) -> list[dict]:
    """The jobcomp hook's rows for these sacct runs, once all of them reached the shared store."""
    want = {(r["job_id"], r["run"]) for r in runs}
    deadline = time.monotonic() + timeout
    while True:
        ingest_shared()
        rows = shared_rows(sorted({j for j, _ in want}))
        if want <= {(r["job_id"], r["run"]) for r in rows}:
            return rows
        if time.monotonic() > deadline:
            raise TimeoutError(f"hook records missing after {timeout:.0f} s: "
                               f"{sorted(want - {(r['job_id'], r['run']) for r in rows})}")
        time.sleep(1)


def put(spool_dir: Path, recs: list[dict]) -> None:
    """Records into a private spool, as the hook writes them."""
    for i, rec in enumerate(recs):
        rec = {k: v for k, v in rec.items() if k != "ingested_at"}
        spool.write(spool_dir, f"job-{rec['cluster']}-{rec['job_id']}-{rec['run']}-{time.time_ns()}{i}",
                    {"version": 1, "kind": "job", **rec})


def sk(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run([SK, *args], capture_output=True, text=True)
    if check and res.returncode != 0:
        raise AssertionError(f"sk {' '.join(args)} exited {res.returncode}: {res.stderr}")
    return res


def sk_json(*args: str) -> dict:
    return json.loads(sk(*args, "--json").stdout)


def private_rows(store: Path, job_ids: list[int]) -> list[dict]:
    with sqlite3.connect(store) as conn:
        cur = conn.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE job_id IN "
                           f"({', '.join('?' for _ in job_ids)}) ORDER BY job_id, run", job_ids)
        return [dict(zip(JOB_COLUMNS, r, strict=True)) for r in cur.fetchall()]


def jobcomp_env(rec: dict) -> dict[str, str]:
    """The variables Slurm 22.05's jobcomp/script passes for this run (values as sacct reports the run)."""
    env = {"CLUSTER": rec["cluster"], "JOBID": str(rec["job_id"]), "JOBSTATE": rec["state"],
           "SUBMIT": str(rec["submit_time"]), "START": str(rec["start_time"] or rec["end_time"]),
           "END": str(rec["end_time"]), "NODES": rec["nodes"] or "", "NODECNT": str(rec["node_count"]),
           "PROCS": str(rec["cpus"]), "ACCOUNT": rec["account"] or "", "PARTITION": rec["partition"] or "",
           "QOS": rec["qos"] or "", "USERNAME": rec["user_name"] or "", "UID": str(rec["uid"]),
           "JOBNAME": rec["job_name"] or "", "EXITCODE": f"{rec['exit_code'] or 0}:0", "BATCH": "yes",
           "ARRAYJOBID": str(rec["array_job_id"] or 0), "ARRAYTASKID": str(rec["array_task_id"] or 4294967294)}
    return env


def run_jobcomp_wrapper(env: dict[str, str], **extra: str) -> subprocess.CompletedProcess:
    """The devcluster's installed jobcomp wrapper (contrib/slurm/sk-hook), with the environment Slurm gives it
    plus `extra` (a private SK_SPOOL, a PATH)."""
    return subprocess.run([str(DC_DIR / "bin" / "sk-jobcomp")], env={**env, **extra}, capture_output=True,
                          text=True, timeout=60)
