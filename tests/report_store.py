"""The one shared helper for report tests: build a store with open_store(), write job rows as ingest does (a job
record through slurmkit/store/jobs.py, node_type from the devcluster site's partition map) and GPU rows with plain
SQL."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from slurmkit.record import JOB_COLUMNS
from slurmkit.site.model import load_site, partition_node_types
from slurmkit.store import jobs
from slurmkit.store.db import open_store

T0 = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())  # 2026-11-01 00:00 UTC
H = 3600
# The devcluster site's partition -> node type map (gpu -> devnode), what `sk admin ingest` names node_type with.
NODE_TYPES = partition_node_types(load_site(Path(__file__).resolve().parents[1] / "site_config" / "devcluster.yaml"))


def add_job(store, job_id, *, user, account="phys", partition="gpu", gpus=1, start, end, submit=None, run=0,
            gpu_types="a100", array=None, cluster="dev", state="COMPLETED"):
    """One job run, as the jobcomp hook records it (no node_type: ingest names it from the partition)."""
    rec = {"version": 1, "kind": "job", "cluster": cluster, "job_id": job_id, "run": run,
           "array_job_id": array[0] if array else None, "array_task_id": array[1] if array else None,
           "job_name": f"job{job_id}", "user_name": user, "account": account, "partition": partition,
           "qos": "normal", "state": state, "submit_time": submit if submit is not None else start,
           "start_time": start, "end_time": end, "elapsed_s": end - start, "nodes": "gpu01", "node_count": 1,
           "gpus": gpus, "gpu_types": gpu_types, "source": "jobcomp"}
    store.execute(f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' for _ in JOB_COLUMNS)})",
                  jobs.row(rec, NODE_TYPES))


def add_gpus(store, job_id, utils, *, idle=None, run=0, source="simulated", cluster="dev", node="gpu01"):
    """One job_gpus row per entry of `utils` (util_mean %); idle = idle_fraction per GPU."""
    for i, u in enumerate(utils):
        store.execute(
            "INSERT INTO job_gpus (cluster, job_id, run, node, gpu_index, util_mean, util_max, idle_fraction, "
            "mem_max_mib, mem_total_mib, energy_j, samples, source) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (cluster, job_id, run, node, i, u, u, idle[i] if idle else 0.0, 1000, 81920, 1.0e5, 100, source))


def scenario(path):
    """The hand-computed scenario of tests/test_report.py (window 2026-11-01 00:00 .. 2026-11-02 00:00 UTC).

    `path`: a SQLite file or a postgresql:// URL (committed before returning)."""
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
    if s.dialect == "postgresql":
        s.conn.commit()
    return s


def check_scenario_by_user(rep):
    """The hand-computed figures of scenario() in 2026-11-01 UTC, by user (shared by the SQLite and PG tests)."""
    r = {row["user"]: row for _, row in rep.table.iterrows()}
    a, b = r["alice"], r["bob"]
    # alice: job1 4 GPUs x 2 h = 8, job2 1 GPU x 1 h inside the window = 1 -> 9 GPU-h; job5 is outside.
    assert a["jobs"] == 2 and a["gpu_hours"] == pytest.approx(9.0)
    # used: job1 (0.8 + 0.8) x 2 h = 3.2, job2 0.5 x 1 h = 0.5 -> 3.7; mean util 3.7 / 9 = 41.11 %
    assert a["gpu_hours_used"] == pytest.approx(3.7)
    assert a["mean_util_pct"] == pytest.approx(370 / 9)
    # wasted: job1 (0.1 + 0.1 + 1 + 1) x 2 h = 4.4, job2 0.5 x 1 h = 0.5 -> 4.9
    assert a["gpu_hours_wasted"] == pytest.approx(4.9)
    # job1: 2 idle GPUs while 2 worked -> 2 GPUs, 2 x 2 h = 4 GPU-h
    assert a["idle_gpus_in_multi"] == 2 and a["idle_gpu_hours_in_multi"] == pytest.approx(4.0)
    # bob: job3 2 x 3 = 6 (no metrics), job4 run0 1 x 1 + run1 1 x 2 = 3 -> 9 GPU-h, 3 job runs
    assert b["jobs"] == 3 and b["gpu_hours"] == pytest.approx(9.0)
    assert b["jobs_no_metrics"] == 1 and b["gpu_hours_unmeasured"] == pytest.approx(6.0)
    # measured 3 GPU-h all at 100 % -> mean util 100 %, not diluted by the unmeasured job (never 0 %)
    assert b["mean_util_pct"] == pytest.approx(100.0) and b["grade"] == "A"
    assert a["grade"] == "C"  # 41 % is in C (30-50 %)
    # share: 9 / 18 each; queue wait alice (1 + 1) / 2 = 1 h, bob (3 + 1 + 0.5) / 3 = 1.5 h
    assert a["share_pct"] == pytest.approx(50.0) and b["share_pct"] == pytest.approx(50.0)
    assert a["mean_wait_h"] == pytest.approx(1.0) and b["mean_wait_h"] == pytest.approx(1.5)
    assert rep.totals["gpu_hours"] == pytest.approx(18.0) and rep.totals["jobs"] == 5
    assert a["sources"] == "simulated" and b["sources"] == "nvml"
    assert any("SIMULATED" in n for n in rep.notes)
