"""Root in the spool (issue 16): `sk admin ingest` and `reconcile` run as root in a directory that hooks write
into. Each link attack of the issue is set up for real, and the test asserts that its target is untouched:
the ingest lock, the quarantine directory, a .reason file and a record that are links, a FIFO as a record, a
spool or quarantine others may write into, and a planted temporary file of the writer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.accounting import reconcile, spool
from slurmkit.accounting.ingest import ingest
from slurmkit.errors import StoreError
from slurmkit.store.db import open_store

SK = str(Path(sys.executable).parent / "sk")
SECRET = b"root:do-not-touch\n"


def job_rec(job_id: int) -> dict:
    return {"version": 1, "kind": "job", "cluster": "dev", "job_id": job_id, "run": 0, "user_name": "alice",
            "state": "COMPLETED", "start_time": 1000, "end_time": 2000, "elapsed_s": 1000, "gpus": 1,
            "source": "jobcomp"}


@pytest.fixture
def env(tmp_path):
    """(spool, store path, outside): a spool with one good record, and a directory outside it with a target file
    that root must never write, move or read into the store."""
    spool_dir, outside = tmp_path / "spool", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(SECRET)
    spool.write(spool_dir, "job-dev-1-0-1", job_rec(1))
    return spool_dir, tmp_path / "s.db", outside


def jobs_in(store_path: Path) -> list[int]:
    with open_store(str(store_path)) as store:
        return sorted(r[0] for r in store.execute("SELECT job_id FROM jobs").fetchall())


def untouched(outside: Path) -> None:
    assert (outside / "secret").read_bytes() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]


def test_a_lock_that_is_a_link_is_refused_and_its_target_not_truncated(env):
    spool_dir, store_path, outside = env
    (spool_dir / ".ingest.lock").symlink_to(outside / "secret")
    run = subprocess.run([SK, "admin", "ingest", "--spool", str(spool_dir), "--store", str(store_path)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert ".ingest.lock: the ingest lock is a symbolic link" in run.stderr
    untouched(outside)
    assert spool.pending(spool_dir)  # nothing ingested, nothing lost


def test_reconcile_refuses_a_lock_that_is_a_link(env):
    spool_dir, _, outside = env
    (spool_dir / ".ingest.lock").symlink_to(outside / "secret")
    with pytest.raises(StoreError, match="symbolic link"), reconcile.ingest_lock(spool_dir):
        pass
    untouched(outside)


def test_a_lock_that_is_a_fifo_is_refused_without_blocking(env):
    spool_dir, store_path, _ = env
    os.mkfifo(spool_dir / ".ingest.lock")
    with open_store(str(store_path)) as store, pytest.raises(StoreError, match="not a regular file"):
        ingest(store, spool_dir)


def test_a_quarantine_that_is_a_link_is_refused_and_nothing_moves_there(env):
    spool_dir, store_path, outside = env
    (spool_dir / "quarantine").symlink_to(outside, target_is_directory=True)
    (spool_dir / "job-bad.json").write_bytes(b"{not json")
    with open_store(str(store_path)) as store, pytest.raises(StoreError, match="quarantine is a symbolic link"):
        ingest(store, spool_dir)
    untouched(outside)
    assert (spool_dir / "job-bad.json").read_bytes() == b"{not json"  # left in the spool, not lost


def test_a_reason_file_that_is_a_link_is_replaced_not_followed(env):
    spool_dir, store_path, outside = env
    (spool_dir / "quarantine").mkdir()
    (spool_dir / "quarantine" / "job-bad.json.reason").symlink_to(outside / "secret")
    (spool_dir / "job-bad.json").write_bytes(b"[]")
    with open_store(str(store_path)) as store:
        res = ingest(store, spool_dir)
    assert (res.ingested, res.quarantined) == (1, 1)
    reason = spool_dir / "quarantine" / "job-bad.json.reason"
    assert not reason.is_symlink() and "not a JSON object" in reason.read_text()
    untouched(outside)


def test_a_record_that_is_a_link_outside_the_spool_is_quarantined_not_ingested(env):
    spool_dir, store_path, outside = env
    (outside / "secret").write_text(json.dumps(job_rec(99)))  # a valid record: following the link would store it
    (spool_dir / "job-dev-99-0-1.json").symlink_to(outside / "secret")
    before = (outside / "secret").read_bytes()
    with open_store(str(store_path)) as store:
        res = ingest(store, spool_dir)
    assert (res.ingested, res.quarantined, res.remaining) == (1, 1, 0)
    assert jobs_in(store_path) == [1]
    moved = spool_dir / "quarantine" / "job-dev-99-0-1.json"
    assert moved.is_symlink()  # the link itself moved; its target stays where it was
    assert "symbolic link is never followed" in (spool_dir / "quarantine" / "job-dev-99-0-1.json.reason").read_text()
    assert (outside / "secret").read_bytes() == before


def test_a_fifo_or_a_directory_as_a_record_is_quarantined_without_blocking(env):
    spool_dir, store_path, _ = env
    os.mkfifo(spool_dir / "job-fifo.json")
    (spool_dir / "job-dir.json").mkdir()
    with open_store(str(store_path)) as store:
        res = ingest(store, spool_dir)
    assert (res.ingested, res.quarantined, res.remaining) == (1, 2, 0)
    for name in ("job-fifo.json", "job-dir.json"):
        assert "not a regular file" in (spool_dir / "quarantine" / f"{name}.reason").read_text()


def test_a_world_writable_spool_is_refused_unless_root_owned_and_sticky(env):
    spool_dir, store_path, _ = env
    os.chmod(spool_dir, 0o777)
    run = subprocess.run([SK, "admin", "ingest", "--spool", str(spool_dir), "--store", str(store_path)],
                         capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert "is world-writable (mode 0777) and not a root-owned sticky directory" in run.stderr
    with pytest.raises(spool.UnsafeSpool):
        spool.pending(spool_dir)
    if os.geteuid() == 0:  # root-owned and sticky, like /tmp: nobody can remove or rename another's files
        os.chmod(spool_dir, 0o1777)
        with open_store(str(store_path)) as store:
            assert ingest(store, spool_dir).ingested == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_quarantine_owned_by_another_user_is_refused(env):
    spool_dir, store_path, _ = env
    (spool_dir / "quarantine").mkdir()
    os.chown(spool_dir / "quarantine", 65534, 65534)
    (spool_dir / "job-bad.json").write_bytes(b"[]")
    with open_store(str(store_path)) as store, pytest.raises(StoreError, match="owned by uid 65534"):
        ingest(store, spool_dir)
    assert (spool_dir / "job-bad.json").exists()


def test_the_writer_never_follows_a_planted_temporary_file(env):
    spool_dir, _, outside = env
    (spool_dir / f".job-dev-2-0-1.{os.getpid()}.tmp").symlink_to(outside / "secret")
    path = spool.write(spool_dir, "job-dev-2-0-1", job_rec(2))
    assert json.loads(Path(path).read_text())["job_id"] == 2
    untouched(outside)
