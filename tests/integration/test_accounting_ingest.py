"""`sk admin ingest` never loses or duplicates a record, whatever fails: SIGKILL in the middle, a locked SQLite
store, PostgreSQL stopped, a corrupted spool file.

The records are what the devcluster's jobcomp hook really wrote (tests/data/accounting/store-rows-jobcomp.json),
copied under made-up job ids where many are needed. Private spool and store per test: nothing here needs the
cluster, except that stopping PostgreSQL (the server shared with other tests) needs root and contrib/devcluster.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from slurmkit.store.db import open_store
from tests.integration import accounting as acct

DATA = Path(__file__).resolve().parents[1] / "data" / "accounting"
TEMPLATE = json.loads((DATA / "store-rows-jobcomp.json").read_text())[2]  # job 124, the 2-node job


def records(n: int, first_id: int = 10_000_000) -> list[dict]:
    return [{**TEMPLATE, "cluster": "sk-ingest-test", "job_id": first_id + i, "run": 0} for i in range(n)]


def fast_spool(d: Path, recs: list[dict]) -> None:
    """Many spool files quickly (no fsync per file: test set-up; same names and content as the hook's)."""
    d.mkdir(parents=True, exist_ok=True)
    for i, rec in enumerate(recs):
        rec = {"version": 1, "kind": "job", **{k: v for k, v in rec.items() if k != "ingested_at"}}
        (d / f"job-{rec['cluster']}-{rec['job_id']}-0-{i}.json").write_text(json.dumps(rec))


def count(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]


def spooled(d: Path) -> int:
    return len(list(d.glob("*.json")))


def test_sigkill_mid_ingest_loses_and_duplicates_nothing(tmp_path):
    n = 20_000
    spool_dir, store = tmp_path / "spool", tmp_path / "store.db"
    fast_spool(spool_dir, records(n))
    open_store(str(store)).close()
    proc = subprocess.Popen([acct.SK, "admin", "ingest", "--spool", str(spool_dir), "--store", str(store)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while count(store) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored, left = count(store), spooled(spool_dir)
    assert proc.returncode == -signal.SIGKILL
    assert 0 < stored < n, "ingest finished or never committed before the kill: make it slower"
    assert stored + left >= n  # every record is in the store or still spooled (or both: killed before unlink)
    acct.sk("admin", "ingest", "--spool", str(spool_dir), "--store", str(store))
    assert (count(store), spooled(spool_dir)) == (n, 0)
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(DISTINCT job_id), MIN(job_id), MAX(job_id) FROM jobs").fetchone() == (
            n, 10_000_000, 10_000_000 + n - 1)


def test_locked_sqlite_store_keeps_the_records_spooled(tmp_path):
    spool_dir, store = tmp_path / "spool", tmp_path / "store.db"
    fast_spool(spool_dir, records(3))
    open_store(str(store)).close()
    locker = sqlite3.connect(store, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        res = acct.sk("admin", "ingest", "--spool", str(spool_dir), "--store", str(store), "--timeout", "1",
                      check=False)
        assert res.returncode == 1 and "database is locked" in res.stderr and "stay in the spool" in res.stderr
        assert "Traceback" not in res.stderr and spooled(spool_dir) == 3
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert acct.sk_json("admin", "ingest", "--spool", str(spool_dir), "--store", str(store))["ingested"] == 3
    assert (count(store), spooled(spool_dir)) == (3, 0)


@pytest.mark.postgres
def test_stopped_postgresql_keeps_the_records_spooled(pg_schema_url, tmp_path):
    url = pg_schema_url()
    open_store(url).close()
    spool_dir = tmp_path / "spool"
    fast_spool(spool_dir, records(3))
    pg_down, pg_up = acct.ROOT / "contrib/devcluster/pg-down", acct.ROOT / "contrib/devcluster/pg-up"
    subprocess.run([str(pg_down)], check=True, capture_output=True)
    try:  # PostgreSQL is shared with other tests: down for one failed ingest only (a few seconds)
        res = acct.sk("admin", "ingest", "--spool", str(spool_dir), "--store", url, "--timeout", "2", check=False)
    finally:
        subprocess.run([str(pg_up)], check=True, capture_output=True)
    assert res.returncode == 1 and "cannot open the accounting store" in res.stderr
    assert "stay in the spool" in res.stderr and "Traceback" not in res.stderr and spooled(spool_dir) == 3
    assert acct.sk_json("admin", "ingest", "--spool", str(spool_dir), "--store", url)["ingested"] == 3
    with open_store(url) as store:
        assert store.execute("SELECT COUNT(*) FROM jobs WHERE cluster = 'sk-ingest-test'").fetchone()[0] == 3
    assert spooled(spool_dir) == 0


def test_corrupted_spool_files_are_quarantined_with_their_reason(tmp_path):
    spool_dir, store = tmp_path / "spool", tmp_path / "store.db"
    fast_spool(spool_dir, records(2))
    good = json.dumps({"version": 1, "kind": "job", **records(1, first_id=20_000_000)[0]})
    bad = {"job-torn.json": good[: len(good) // 2].encode(),  # half a record
           "job-future.json": good.replace('"version": 1', '"version": 99').encode(),
           "job-list.json": b"[]", "job-binary.json": os.urandom(64)}
    for name, data in bad.items():
        (spool_dir / name).write_bytes(data)
    run = acct.sk("admin", "ingest", "--spool", str(spool_dir), "--store", str(store), "--json", check=False)
    assert run.returncode == 3, run.stderr  # documented: something was quarantined, the rest was ingested
    res = json.loads(run.stdout)
    assert (res["ingested"], res["quarantined"], res["remaining"]) == (2, 4, 0)
    q = spool_dir / "quarantine"
    for name, data in bad.items():
        assert (q / name).read_bytes() == data  # kept as it was, never deleted
    reason = {name: (q / f"{name}.reason").read_text() for name in bad}
    assert reason["job-torn.json"].startswith("not valid JSON")
    assert "unknown record version 99" in reason["job-future.json"]
    assert "not a JSON object" in reason["job-list.json"]
    assert reason["job-binary.json"].startswith("not valid JSON")
    assert count(store) == 2
