"""Node GPU summaries through `sk admin ingest` into job_gpus: both arrival orders, idempotence, bad records,
and the AdminComment path reconcile uses (slurmkit/store/gpus.upsert). SQLite here; the same SQL on a real
PostgreSQL at the end."""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from slurmkit.accounting import admin_comment, gpusummary, spool
from slurmkit.accounting.ingest import ingest
from slurmkit.store import gpus as store_gpus
from slurmkit.store.db import open_store


def job_rec(job_id: int, run: int = 0) -> dict:
    return {"version": 1, "kind": "job", "cluster": "dev", "job_id": job_id, "run": run, "user_name": "alice",
            "account": "research", "partition": "gpu", "state": "COMPLETED", "start_time": 1000,
            "end_time": 2000, "elapsed_s": 1000, "nodes": "gpu[01-02]", "node_count": 2, "gpus": 3,
            "gpu_types": "a100", "source": "jobcomp"}


def gpus_rec(job_id: int, node: str, indices: list[int], run: int = 0, samples: int = 10,
             flags: list[str] | None = None) -> dict:
    gpus = [{"index": i, "uuid": f"SIMULATED-{node}-{i}", "util_mean": 50.0 + i, "util_max": 90.0,
             "idle_fraction": 0.1, "mem_max_mib": 1000, "mem_total_mib": 81920, "energy_j": 5000.0,
             "power_max_w": 300.0, "samples": samples} for i in indices]
    return gpusummary.node_record(cluster="dev", job_id=job_id, run=run, node=node, source="simulated",
                                  interval_s=10, gpus=gpus, flags=flags or [])


def put(spool_dir, name: str, rec: dict) -> None:
    spool.write(spool_dir, name, rec)


def gpu_rows(store, job_id: int) -> list[tuple]:
    return [tuple(r) for r in store.execute(
        "SELECT node, gpu_index, uuid, util_mean, samples, source, flags FROM job_gpus WHERE job_id = ? "
        "ORDER BY node, gpu_index", (job_id,)).fetchall()]


def joined(store, job_id: int) -> list[tuple]:
    """What the reports see: GPU rows joined to their job run."""
    return [tuple(r) for r in store.execute(
        "SELECT j.user_name, g.node, g.gpu_index FROM jobs j JOIN job_gpus g ON g.cluster = j.cluster "
        "AND g.job_id = j.job_id AND g.run = j.run WHERE j.job_id = ? ORDER BY g.node, g.gpu_index",
        (job_id,)).fetchall()]


EXPECTED = [("alice", "gpu01", 0), ("alice", "gpu01", 5), ("alice", "gpu02", 3)]


def test_gpus_before_job(tmp_path):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    put(sp, "gpus-a", gpus_rec(11, "gpu01", [0, 5]))
    put(sp, "gpus-b", gpus_rec(11, "gpu02", [3]))
    assert ingest(store, sp).ingested == 2
    assert joined(store, 11) == []  # no job yet: rows wait, nothing dropped
    assert len(gpu_rows(store, 11)) == 3
    put(sp, "job-11", job_rec(11))
    assert ingest(store, sp).ingested == 1
    assert joined(store, 11) == EXPECTED


def test_job_before_gpus(tmp_path):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    put(sp, "job-12", job_rec(12))
    ingest(store, sp)
    put(sp, "gpus-a", gpus_rec(12, "gpu01", [0, 5]))
    put(sp, "gpus-b", gpus_rec(12, "gpu02", [3]))
    ingest(store, sp)
    assert joined(store, 12) == EXPECTED


def test_same_batch_and_redelivery_are_idempotent(tmp_path):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    put(sp, "gpus-a", gpus_rec(13, "gpu01", [0, 5]))
    put(sp, "job-13", job_rec(13))
    put(sp, "gpus-a2", gpus_rec(13, "gpu01", [0, 5]))  # the same summary delivered twice
    res = ingest(store, sp)
    assert (res.ingested, res.quarantined, res.remaining) == (3, 0, 0)
    put(sp, "gpus-a3", gpus_rec(13, "gpu01", [0, 5]))
    ingest(store, sp)
    assert [r[:2] for r in gpu_rows(store, 13)] == [("gpu01", 0), ("gpu01", 5)]
    assert store.execute("SELECT COUNT(*) FROM jobs WHERE job_id = 13").fetchone()[0] == 1


def test_fewer_samples_never_replace_more(tmp_path):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    put(sp, "gpus-a", gpus_rec(14, "gpu01", [0], samples=30))
    ingest(store, sp)
    put(sp, "gpus-b", gpus_rec(14, "gpu01", [0], samples=0, flags=["no-sampler"]))
    ingest(store, sp)
    assert gpu_rows(store, 14) == [("gpu01", 0, "SIMULATED-gpu01-0", 50.0, 30, "simulated", None)]
    put(sp, "gpus-c", gpus_rec(14, "gpu01", [0], samples=31, flags=["sampler-died"]))
    ingest(store, sp)
    assert gpu_rows(store, 14)[0][4:] == (31, "simulated", "sampler-died")


def test_metrics_without_a_sample_count_are_never_replaced_by_a_copy_without_metrics(tmp_path):
    # A DCGM summary has numbers but no sample count; a later flagged copy (no numbers, 0 samples) must not win.
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    dcgm = gpus_rec(15, "gpu01", [0], samples=0)
    dcgm["source"], dcgm["gpus"][0]["samples"] = "dcgm", None
    put(sp, "gpus-a", dcgm)
    ingest(store, sp)
    flagged = gpus_rec(15, "gpu01", [0], samples=0, flags=["source-unavailable"])
    flagged["gpus"][0].update(util_mean=None, util_max=None, idle_fraction=None)
    put(sp, "gpus-b", flagged)
    ingest(store, sp)
    assert gpu_rows(store, 15) == [("gpu01", 0, "SIMULATED-gpu01-0", 50.0, None, "dcgm", None)]
    # ...while a copy with numbers does replace one without them
    put(sp, "gpus-c", flagged)
    store.execute("DELETE FROM job_gpus WHERE job_id = 15")
    ingest(store, sp)
    put(sp, "gpus-d", dcgm)
    ingest(store, sp)
    assert gpu_rows(store, 15)[0][3:6] == (50.0, None, "dcgm")


def test_requeued_runs_keep_their_own_gpu_rows(tmp_path):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    put(sp, "gpus-r0", gpus_rec(15, "gpu01", [0], run=0))
    put(sp, "gpus-r1", gpus_rec(15, "gpu01", [4], run=1))
    ingest(store, sp)
    runs = store.execute("SELECT run, gpu_index FROM job_gpus WHERE job_id = 15 ORDER BY run").fetchall()
    assert [tuple(r) for r in runs] == [(0, 0), (1, 4)]


@pytest.mark.parametrize(("mutate", "reason"), [
    (lambda r: r.update(version=9), "unknown gpus record version 9"),
    (lambda r: r.update(job_id="12"), "job_id is not an integer"),
    (lambda r: r.pop("node"), "missing node"),
    (lambda r: r.update(gpus=[{"uuid": "x"}]), "gpus[0]: missing index"),
    (lambda r: r.update(gpus={"0": {}}), "gpus is not a list of objects"),
    (lambda r: r["gpus"][0].update(util_mean=101.0), "gpus[0]: util_mean 101.0 is out of range 0..100"),
])
def test_bad_gpus_record_is_quarantined_with_its_reason(tmp_path, mutate, reason):
    sp, store = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    rec = gpus_rec(16, "gpu01", [0])
    mutate(rec)
    put(sp, "gpus-bad", rec)
    put(sp, "gpus-good", gpus_rec(17, "gpu01", [1]))
    res = ingest(store, sp)
    assert (res.ingested, res.quarantined) == (1, 1)
    assert reason in (sp / "quarantine" / "gpus-bad.json.reason").read_text()
    assert len(gpu_rows(store, 17)) == 1


def test_admin_comment_segments_upsert_like_spool_files(tmp_path):
    """Reconcile's path: sacct's AdminComment -> parse_admin_comment -> store.gpus.upsert."""
    store = open_store(str(tmp_path / "a.db"))
    text = admin_comment.merge(admin_comment.merge("", gpus_rec(18, "gpu01", [0, 5])), gpus_rec(18, "gpu02", [3]))
    recs = admin_comment.parse_admin_comment(text)
    assert store_gpus.upsert(store, recs) == 3
    assert store_gpus.upsert(store, recs) == 3  # again: same rows, not more
    assert [r[:2] for r in gpu_rows(store, 18)] == [("gpu01", 0), ("gpu01", 5), ("gpu02", 3)]
    with pytest.raises(ValueError, match="not a gpus record"):
        store_gpus.upsert(store, [job_rec(18)])


def test_flags_column_comes_from_migration_0002(tmp_path):
    store = open_store(str(tmp_path / "a.db"))
    assert store.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] >= 2
    cols = {r[1]: r[2] for r in store.execute("PRAGMA table_info(job_gpus)").fetchall()}
    assert cols["flags"] == "TEXT"


@pytest.mark.postgres
def test_gpus_upsert_on_postgresql(pg_url, tmp_path):
    import psycopg

    schema = f"sk_gpus_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        url = pg_url + ("&" if "?" in pg_url else "?") + "options=" + quote(f"-csearch_path={schema}")
        store = open_store(url)
        sp = tmp_path / "spool"
        put(sp, "gpus-a", gpus_rec(19, "gpu01", [0, 5]))
        ingest(store, sp)
        put(sp, "job-19", job_rec(19))
        put(sp, "gpus-b", gpus_rec(19, "gpu02", [3]))
        put(sp, "gpus-c", gpus_rec(19, "gpu01", [0, 5], samples=1))  # fewer samples: ignored
        assert ingest(store, sp).ingested == 3
        assert joined(store, 19) == EXPECTED
        assert [r[4] for r in gpu_rows(store, 19)] == [10, 10, 10]
        store.close()
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

