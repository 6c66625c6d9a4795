"""Synthetic accounting store for benchmarks: N job runs (+ their per-GPU rows) written straight into a slurmkit
SQLite store (schema from slurmkit.store migrations) with executemany, vectorised with numpy.

The mix imitates a university GPU cluster; every number is drawn, none is measured (metric source 'simulated'):
* ~400 users with Zipf-like activity, each charging one or two of 40 accounts;
* partitions gpu / gpu-large / debug / interactive / preempt with their GPU types and time limits;
* GPUs per job 1 (most), 2, 4, 8, and multi-node 16/32; durations log-normal (median ~1 h), queue waits exponential;
* per-user habits: a user's jobs share a utilization level (beta distribution, cluster mean ~50 %, as jobstats
  reports); 15 % of multi-GPU jobs leave some GPUs idle; 10 % of jobs have no GPU metrics at all;
* 20 % of jobs are array tasks (arrays of 5-100 tasks), 2 % are requeued once (two runs of one job id).

    .venv/bin/python bench/synth.py --jobs 1000000 --out /tmp/sk-bench.db
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from slurmkit.store import rollup
from slurmkit.store.db import open_store

SPAN_START = int(datetime(2025, 12, 1, tzinfo=timezone.utc).timestamp())
SPAN_END = int(datetime(2026, 12, 1, tzinfo=timezone.utc).timestamp())
PARTITIONS = (  # name, share of jobs, gpu type, node type, max hours
    ("gpu", 0.55, "a100", "dgx-a100", 48.0),
    ("gpu-large", 0.15, "h100", "dgx-h100", 48.0),
    ("debug", 0.10, "a100", "dgx-a100", 1.0),
    ("interactive", 0.12, "l40s", "l40s-4", 8.0),
    ("preempt", 0.08, "a100", "dgx-a100", 24.0),
)
GPU_COUNTS = np.array([1, 2, 4, 8, 16, 32])
GPU_SHARE = np.array([0.52, 0.15, 0.18, 0.12, 0.02, 0.01])
STATES = np.array(["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"])
STATE_SHARE = np.array([0.80, 0.08, 0.07, 0.04, 0.01])
N_USERS, N_ACCOUNTS = 400, 40
ZONE = "Europe/Berlin"  # the zone whose local days the store's rollup keeps
CHUNK = 250_000

JOB_SQL = ("INSERT INTO jobs (cluster, job_id, run, array_job_id, array_task_id, job_name, user_name, uid, account, "
           "partition, qos, state, exit_code, submit_time, start_time, end_time, elapsed_s, nodes, node_count, cpus, "
           "gpus, gpu_types, node_type, source, ingested_at) VALUES "
           "('bench', ?, ?, ?, ?, ?, ?, ?, ?, ?, 'normal', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'jobcomp', ?)")
GPU_SQL = ("INSERT INTO job_gpus (cluster, job_id, run, node, gpu_index, util_mean, util_max, idle_fraction, "
           "mem_max_mib, mem_total_mib, samples, interval_s, source) VALUES "
           "('bench', ?, ?, ?, ?, ?, ?, ?, ?, 81920, ?, 30.0, 'simulated')")


def _jobs(rng: np.random.Generator, n: int, first_id: int, acct_of_user: np.ndarray,
          span: tuple[int, int]) -> dict[str, np.ndarray]:
    """Column arrays for n job runs starting in `span` (requeues add a second run of the same job id).

    Starts are sorted and job ids follow them, as in a real store, where Slurm numbers jobs in submit order and
    the hook's rows arrive in end order: consecutive rows are close in time (what a window's index scan meets).
    """
    weights = 1.0 / np.arange(1, N_USERS + 1) ** 0.9
    user = rng.choice(N_USERS, size=n, p=weights / weights.sum())
    account = acct_of_user[user, (rng.random(n) < 0.25).astype(int)]
    part = rng.choice(len(PARTITIONS), size=n, p=[p[1] for p in PARTITIONS])
    gpus = rng.choice(GPU_COUNTS, size=n, p=GPU_SHARE)
    gpus = np.where(part == 2, np.minimum(gpus, 2), gpus)  # debug: small
    gpus = np.where(part == 3, np.minimum(gpus, 4), gpus)  # interactive: one l40s node
    max_h = np.array([p[4] for p in PARTITIONS])[part]
    hours = np.minimum(np.exp(rng.normal(0.0, 1.3, size=n)), max_h)
    elapsed = np.maximum(60, (hours * 3600).astype(np.int64))
    start = np.sort(rng.integers(span[0], span[1], size=n))
    wait = rng.exponential(1800, size=n).astype(np.int64)
    job_id = first_id + np.arange(n)
    # arrays: blocks of 5-100 of the array-flagged jobs share the array's id (its first task's id), tasks 0..k-1
    is_array = rng.random(n) < 0.20
    array_id = np.full(n, -1, dtype=np.int64)
    task = np.full(n, -1, dtype=np.int64)
    i = 0
    idx = np.flatnonzero(is_array)
    while i < len(idx):
        k = int(rng.integers(5, 101))
        block = idx[i:i + k]
        array_id[block] = job_id[block[0]]
        task[block] = np.arange(len(block))
        user[block] = user[block[0]]
        account[block] = account[block[0]]
        part[block] = part[block[0]]
        gpus[block] = gpus[block[0]]
        i += k
    state = rng.choice(STATES, size=n, p=STATE_SHARE)
    return {"job_id": job_id, "user": user, "account": account, "part": part, "gpus": gpus, "start": start,
            "elapsed": elapsed, "wait": wait, "array_id": array_id, "task": task, "state": state,
            "requeued": rng.random(n) < 0.02}


def _job_rows(c: dict[str, np.ndarray], run: np.ndarray, start: np.ndarray, elapsed: np.ndarray,
              state: np.ndarray):
    gpus = c["gpus"]
    nodes = np.maximum(1, gpus // 8)
    part_names = np.array([p[0] for p in PARTITIONS])[c["part"]]
    types = np.array([p[2] for p in PARTITIONS])[c["part"]]
    ntypes = np.array([p[3] for p in PARTITIONS])[c["part"]]
    arr = np.where(c["array_id"] >= 0, c["array_id"], 0)
    return zip(
        c["job_id"].tolist(), run.tolist(), [a or None for a in arr.tolist()],
        [t if t >= 0 else None for t in c["task"].tolist()],
        [f"train-{u % 37}" for u in c["user"].tolist()],
        [f"user{u:03d}" for u in c["user"].tolist()], (20000 + c["user"]).tolist(),
        [f"acct{a:02d}" for a in c["account"].tolist()], part_names.tolist(), state.tolist(),
        np.where(state == "COMPLETED", 0, 1).tolist(), (start - c["wait"]).tolist(), start.tolist(),
        (start + elapsed).tolist(), elapsed.tolist(),
        [f"gpu[{i % 64 + 1:02d}-{i % 64 + k:02d}]" if k > 1 else f"gpu{i % 64 + 1:02d}"
         for i, k in zip(c["job_id"].tolist(), nodes.tolist(), strict=True)],
        nodes.tolist(), (gpus * 8).tolist(), gpus.tolist(), types.tolist(), ntypes.tolist(),
        (start + elapsed + 60).tolist(), strict=True)


def _gpu_rows(rng: np.random.Generator, c: dict[str, np.ndarray], run: np.ndarray, user_util: np.ndarray,
              elapsed: np.ndarray):
    """Per-GPU rows for the jobs that have metrics (90 %)."""
    has = rng.random(len(run)) >= 0.10
    counts = np.where(has, c["gpus"], 0)
    job = np.repeat(np.arange(len(run)), counts)
    gpu_index = np.arange(len(job)) - np.repeat(np.cumsum(counts) - counts, counts)
    util = np.clip(user_util[c["user"][job]] + rng.normal(0, 8, size=len(job)), 0, 100)
    # 15 % of multi-GPU jobs leave every GPU but the first idle
    lazy = (rng.random(len(run)) < 0.15) & (c["gpus"] > 1)
    util = np.where(lazy[job] & (gpu_index > 0), rng.uniform(0, 3, size=len(job)), util)
    idle = np.clip(1 - util / 100 + rng.normal(0, 0.05, size=len(job)), 0, 1)
    node = [f"gpu{(j + g // 8) % 64 + 1:02d}" for j, g in zip(c["job_id"][job].tolist(), gpu_index.tolist(),
                                                               strict=True)]
    return zip(c["job_id"][job].tolist(), run[job].tolist(), node, (gpu_index % 8).tolist(),
               np.round(util, 2).tolist(), np.minimum(100, util + 15).round(2).tolist(), np.round(idle, 4).tolist(),
               rng.integers(1000, 81920, size=len(job)).tolist(), (elapsed[job] // 30 + 1).tolist(), strict=True)


def generate(path: str | Path, n_jobs: int, seed: int = 1) -> dict[str, float]:
    """Write about n_jobs job runs to a new store at `path`; returns counts and seconds.

    Written under a temporary name and renamed when complete, so an interrupted run never leaves a partial
    store where a cache (bench/report.py) would take it for a finished one.
    """
    final = Path(path)
    path = final.with_name(final.name + ".partial")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    open_store(str(path)).close()  # schema from the real migrations
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")  # a throw-away bulk load: no journal, no fsync
    conn.execute("PRAGMA synchronous=OFF")
    rng = np.random.default_rng(seed)
    user_util = np.clip(rng.beta(2.0, 2.0, size=N_USERS) * 100, 1, 99)
    acct_of_user = rng.integers(0, N_ACCOUNTS, size=(N_USERS, 2))  # drawn once: a user keeps their accounts
    t0 = time.perf_counter()
    n_rows = n_gpu_rows = 0
    next_id = 1_000_000
    n_chunks = -(-n_jobs // CHUNK)
    edges = np.linspace(SPAN_START - 2 * 86400, SPAN_END, n_chunks + 1).astype(np.int64)
    chunk = 0
    while n_rows < n_jobs:
        n = min(CHUNK, n_jobs - n_rows)
        n_first = max(1, round(n / 1.02))  # requeued jobs add a second run
        sl = min(chunk, n_chunks - 1)  # a chunk short of requeues is topped up by one more in the last slice
        c = _jobs(rng, n_first, next_id, acct_of_user, (int(edges[sl]), int(edges[sl + 1])))
        chunk += 1
        next_id += n_first
        req = np.flatnonzero(c["requeued"])[: n - n_first]
        # run 0 of a requeued job ends early (REQUEUED); run 1 starts after a fresh wait
        cut = np.maximum(60, (c["elapsed"][req] * rng.uniform(0.05, 0.9, size=len(req))).astype(np.int64))
        elapsed0 = c["elapsed"].copy()
        elapsed0[req] = cut
        state0 = c["state"].copy()
        state0[req] = "REQUEUED"
        run0 = np.zeros(n_first, dtype=np.int64)
        conn.execute("BEGIN")
        conn.executemany(JOB_SQL, _job_rows(c, run0, c["start"], elapsed0, state0))
        conn.executemany(GPU_SQL, _gpu_rows(rng, c, run0, user_util, elapsed0))
        # the requeued runs (run 1): same job id and owner, their own times
        r = {k: v[req] for k, v in c.items()}
        start1 = c["start"][req] + cut + r["wait"]
        run1 = np.ones(len(req), dtype=np.int64)
        conn.executemany(JOB_SQL, _job_rows(r, run1, start1, r["elapsed"], r["state"]))
        conn.executemany(GPU_SQL, _gpu_rows(rng, r, run1, user_util, r["elapsed"]))
        conn.execute("COMMIT")
        n_rows += n_first + len(req)
    n_gpu_rows = conn.execute("SELECT COUNT(*) FROM job_gpus").fetchone()[0]
    conn.close()
    t1 = time.perf_counter()
    # the usage rollup, as `sk admin ingest` keeps it, with Europe/Berlin's local days registered (as
    # `sk admin rebuild-rollup --zone Europe/Berlin` does) for the bench's reports in that zone
    with open_store(str(path)) as store:
        rollup.rebuild(store, zones=[ZONE])
        store.execute("ANALYZE")
    os.replace(path, final)
    return {"jobs": n_rows, "gpu_rows": n_gpu_rows, "seconds": time.perf_counter() - t0,
            "rollup_seconds": time.perf_counter() - t1, "bytes": os.path.getsize(final)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--out", default="/tmp/sk-bench.db")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    r = generate(a.out, a.jobs, a.seed)
    print(f"{a.out}: {r['jobs']:,} job runs, {r['gpu_rows']:,} GPU rows, {r['bytes'] / 2**20:,.0f} MiB, "
          f"{r['seconds']:.1f} s")


if __name__ == "__main__":
    main()
