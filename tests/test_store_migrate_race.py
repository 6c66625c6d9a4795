"""Concurrent `sk admin ingest` runs creating one new store (issue 16): the migrations run under a lock
(slurmkit/store/db.py), so every run succeeds and each migration is applied exactly once, on SQLite and on
PostgreSQL. Eight real `sk` processes started at once, each with its own spool of one record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.accounting import spool
from slurmkit.store.db import migrations, open_store

SK = str(Path(sys.executable).parent / "sk")
N = 8


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request, tmp_path):
    return str(tmp_path / "new.db") if request.param == "sqlite" else request.getfixturevalue("pg_schema_url")()


def test_eight_ingests_creating_one_store_at_once_all_succeed(tmp_path, new_store):
    for i in range(N):
        spool.write(tmp_path / f"spool{i}", f"job-dev-{i + 1}-0-1",
                    {"version": 1, "kind": "job", "cluster": "dev", "job_id": i + 1, "run": 0, "gpus": 0,
                     "source": "jobcomp"})
    procs = [subprocess.Popen([SK, "admin", "ingest", "--spool", str(tmp_path / f"spool{i}"), "--store", new_store],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(N)]
    results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
    assert [rc for rc, _ in results] == [0] * N, [err for _, err in results]
    with open_store(new_store, migrate=False) as store:
        versions = [r[0] for r in store.execute("SELECT version FROM schema_version ORDER BY version").fetchall()]
        jobs = sorted(r[0] for r in store.execute("SELECT job_id FROM jobs").fetchall())
    assert versions == [n for n, _ in migrations()]  # each applied once
    assert jobs == list(range(1, N + 1))
