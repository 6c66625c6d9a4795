"""The one shared helper for report tests: build a store with open_store() and insert rows with plain SQL."""

from __future__ import annotations

from datetime import datetime, timezone

from slurmkit.store.db import open_store

T0 = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())  # 2026-11-01 00:00 UTC
H = 3600


def add_job(store, job_id, *, user, account="phys", partition="gpu", gpus=1, start, end, submit=None, run=0,
            gpu_types="a100", node_type="devnode", array=None, cluster="dev"):
    store.execute(
        "INSERT INTO jobs (cluster, job_id, run, array_job_id, array_task_id, job_name, user_name, account, "
        "partition, qos, state, submit_time, start_time, end_time, elapsed_s, nodes, node_count, gpus, gpu_types, "
        "node_type, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (cluster, job_id, run, array[0] if array else None, array[1] if array else None, f"job{job_id}", user,
         account, partition, "normal", "COMPLETED", submit if submit is not None else start, start, end,
         end - start, "gpu01", 1, gpus, gpu_types, node_type, "jobcomp"))


def add_gpus(store, job_id, utils, *, idle=None, run=0, source="simulated", cluster="dev", node="gpu01"):
    """One job_gpus row per entry of `utils` (util_mean %); idle = idle_fraction per GPU."""
    for i, u in enumerate(utils):
        store.execute(
            "INSERT INTO job_gpus (cluster, job_id, run, node, gpu_index, util_mean, util_max, idle_fraction, "
            "mem_max_mib, mem_total_mib, energy_j, samples, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (cluster, job_id, run, node, i, u, u, idle[i] if idle else 0.0, 1000, 81920, 1.0e5, 100, source))


def scenario(path):
    """The hand-computed scenario of tests/test_report.py (window 2026-11-01 00:00 .. 2026-11-02 00:00 UTC)."""
    s = open_store(str(path))
    # alice job 1: 4 GPUs, 2 h, two busy (80 %) and two idle (0 %); queued 1 h.
    add_job(s, 1, user="alice", gpus=4, start=T0, end=T0 + 2 * H, submit=T0 - H)
    add_gpus(s, 1, [80, 80, 0, 0], idle=[0.1, 0.1, 1.0, 1.0])
    # alice job 2: 1 GPU across --since: runs T0-1h .. T0+1h, only 1 h inside; queued 1 h.
    add_job(s, 2, user="alice", gpus=1, start=T0 - H, end=T0 + H, submit=T0 - 2 * H)
    add_gpus(s, 2, [50], idle=[0.5])
    # bob job 3: 2 GPUs, 3 h, NO metrics; queued 3 h.
    add_job(s, 3, user="bob", account="chem", gpus=2, start=T0 + 10 * H, end=T0 + 13 * H, submit=T0 + 7 * H)
    # bob job 4, requeued: run 0 1 h, run 1 2 h, each 1 GPU at 100 %; waits 1 h and 0.5 h.
    add_job(s, 4, user="bob", account="chem", gpus=1, start=T0 + H, end=T0 + 2 * H, submit=T0, run=0)
    add_gpus(s, 4, [100], run=0, source="nvml")
    add_job(s, 4, user="bob", account="chem", gpus=1, start=T0 + 3 * H, end=T0 + 5 * H, submit=T0 + 2.5 * H, run=1)
    add_gpus(s, 4, [100], run=1, source="nvml")
    # alice job 5: after the window, must not count.
    add_job(s, 5, user="alice", gpus=8, start=T0 + 25 * H, end=T0 + 26 * H)
    return s
