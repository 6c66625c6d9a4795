"""The usage rollup (slurmkit/store/rollup.py): reports through it give the full query's figures, and every writer
(ingest of job and node records in either order, re-ingest, gpus.upsert, reconcile) leaves it equal to a
recomputation from jobs and job_gpus."""

from __future__ import annotations

import pandas as pd
import pytest
from report_store import T0, H, add_gpus, add_job, check_scenario_by_user, scenario
from test_reconcile import SINCE, UNTIL, fetch, hook_rows
from test_reconcile import put as put_jobs
from test_sampler_ingest import gpus_rec

from slurmkit.accounting import reconcile, spool
from slurmkit.accounting.ingest import ingest
from slurmkit.report import query
from slurmkit.report.build import build
from slurmkit.report.query import Scope, run_aggregate
from slurmkit.report.window import parse_window, periods
from slurmkit.store import gpus as store_gpus
from slurmkit.store import rollup
from slurmkit.store.db import open_store

D = 86400


def rollup_rows(store, table: str = "usage_rollup") -> list[tuple]:
    """The rows of a rollup table: usage_rollup (figures) or usage_rollup_sources (GPU records per source)."""
    values = rollup.SUM_COLUMNS if table == "usage_rollup" else ("source", "gpu_records")
    cols = ", ".join(["lo", "hi", *rollup.KEY_COLUMNS, *values])
    rows = store.execute(f"SELECT {cols} FROM {table}").fetchall()
    return sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows), key=repr)


def stale_buckets(store) -> int:
    return store.execute("SELECT COUNT(*) FROM rollup_buckets WHERE stale = 1").fetchone()[0]


def assert_current(store) -> None:
    """No stale bucket, and the rollup equals one recomputed from scratch out of jobs and job_gpus."""
    assert stale_buckets(store) == 0
    tables = ("usage_rollup", rollup.SOURCES_TABLE)
    kept = [rollup_rows(store, t) for t in tables]
    rollup.rebuild(store)
    assert kept == [rollup_rows(store, t) for t in tables]


def utc_days(b) -> dict[int, bool]:
    """{lo: clean} of the UTC days among the rollup buckets `b`."""
    return {lo: clean for lo, longer in b.spans.items() for hi, clean in longer if hi - lo == D and lo % D == 0}


def full_query(store, window, keys, period, scope, idle_pct=5.0):
    return run_aggregate(store, window, keys, period, scope, idle_pct, every_run=True)


WINDOWS = [("2026-11-01", "2026-11-02", None, "UTC"), ("2026-10-01", "2026-12-01", "day", "UTC"),
           ("2026-10-15", "2026-12-01", "month", "Europe/Berlin"), ("2026-10-31T05:00", "2026-11-03T07:30", "week",
                                                                     "UTC"),
           ("2026-10-31T05:00", "2026-11-03T07:30", "day", "Asia/Kolkata"), ("2026-10-01", "2026-12-01", "month",
                                                                              "UTC"),
           ("2026-10-01", "2026-12-01", "day", "Europe/Berlin"), ("2026-10-20", "2026-11-20", "week",
                                                                  "America/New_York")]


def assert_same_as_full_query(store) -> int:
    """Every window/period/zone/key/scope in WINDOWS: the rollup path's frame equals the full query's."""
    n = 0
    for since, until, period, tz in WINDOWS:
        w = parse_window(since, until, tz=tz)
        assert query._rollup_buckets(store, w, 5.0) is not None  # the rollup path is the one tested
        for keys in (["user"], ["account", "partition"], []):
            for scope in (Scope(), Scope("carol"), Scope("alice")):
                got = run_aggregate(store, w, keys, period, scope)
                pd.testing.assert_frame_equal(got, full_query(store, w, keys, period, scope), check_dtype=False,
                                              rtol=1e-12)
                n += len(got)
    return n


def wide_scenario(url):
    """tests/test_report.py's scenario plus runs across day, month and window edges, one with no user."""
    return add_wide(scenario(url))


def add_wide(s):
    add_job(s, 9, user="carol", gpus=2, start=T0 + 20 * H, end=T0 + 28 * H)
    add_job(s, 10, user="carol", gpus=3, start=T0 - 40 * H, end=T0 + 50 * H, submit=T0 - 50 * H)
    add_gpus(s, 10, [50, 1, 2], idle=[0.5, 1, 1])
    add_job(s, 11, user=None, gpus=3, start=T0 - 400 * H, end=T0 + 50 * H, submit=None)
    add_gpus(s, 11, [50, 1, 2], idle=[0.5, 1, 1], source="nvml")
    if s.dialect == "postgresql":
        s.conn.commit()
    return s


def test_hand_computed_figures_through_the_rollup(tmp_path):
    with scenario(tmp_path / "s.db") as s:
        assert query._rollup_buckets(s, parse_window("2026-11-01", "2026-11-02"), 5.0) is None  # hand-written
        hours = s.execute("SELECT COUNT(DISTINCT start_time / 3600) FROM jobs").fetchone()[0]
        assert rollup.rebuild(s) == hours  # every hour in which a run starts
        window = parse_window("2026-11-01", "2026-11-02")
        assert query._rollup_buckets(s, window, 5.0) is not None
        check_scenario_by_user(build("usage", s, window, ["user"], None, Scope()))


def test_rollup_path_equals_the_full_query(tmp_path):
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        assert assert_same_as_full_query(s) > 100


def test_stale_days_are_computed_run_by_run(tmp_path):
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        # as a writer's mark() leaves the buckets of job 3's start: its hour, day and month
        s.execute("UPDATE rollup_buckets SET stale = 1 WHERE lo <= (SELECT start_time FROM jobs WHERE job_id = 3) "
                  "AND hi > (SELECT start_time FROM jobs WHERE job_id = 3)")
        assert stale_buckets(s) == 3
        # a change the rollup has not seen: reports must not use the stale buckets' rows
        s.execute("UPDATE jobs SET gpus = 7 WHERE job_id = 3")
        assert assert_same_as_full_query(s) > 100


def test_local_days_are_read_from_whole_hour_buckets_not_run_by_run(tmp_path):
    # Europe/Berlin days (DST change on Oct 25 included) start at 22:00 or 23:00 UTC: no UTC day fits in one,
    # but its hours do; no run that starts inside a period may be left to the run-by-run part.
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        w = parse_window("2026-10-20", "2026-11-10", tz="Europe/Berlin")
        cover, raw = query._rollup_plan(query._rollup_buckets(s, w, 5.0), periods(w, "day"), w.since)
        assert cover and all(hi - lo == rollup.HOUR for _, lo, hi in cover)
        run_by_run = sum(s.execute("SELECT COUNT(*) FROM jobs WHERE start_time >= ? AND start_time < ?",
                                   [lo, hi]).fetchone()[0] for _, _, _, lo, hi, kind in raw if kind == 0)
        assert run_by_run == 0
        utc = parse_window("2026-10-01", "2026-12-01")
        cover, _ = query._rollup_plan(query._rollup_buckets(s, utc, 5.0), periods(utc, "month"), utc.since)
        assert {hi - lo for _, lo, hi in cover} <= {28 * D, 30 * D, 31 * D}  # UTC months: month buckets


def test_runs_crossing_period_edges_are_not_computed_run_by_run(tmp_path):
    # The hours hold the seconds each run spent in them: a day (UTC or Berlin) is the sum of its buckets. Only the
    # runs that started before the window are read one by one, and only to count them in its first period.
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        for tz in ("UTC", "Europe/Berlin"):
            w = parse_window("2026-10-20", "2026-11-10", tz=tz)
            cover, raw = query._rollup_plan(query._rollup_buckets(s, w, 5.0), periods(w, "day"), w.since)
            counted = [r for r in raw if r[-1] == 1]  # jobs 10 and 11 started before Oct 20
            assert cover and len(counted) == 1 and counted[0][1:3] == (w.since, w.since)  # no seconds, a count
            # the other rows are the days after the store's last run (no bucket): they read no run
            read = sum(s.execute("SELECT COUNT(*) FROM jobs WHERE start_time >= ? AND start_time < ? AND "
                                 "(end_time > ? OR start_time >= ?)", [lo, hi, ps, ps]).fetchone()[0]
                       for _, ps, _, lo, hi, kind in raw if kind == 0)
            assert read == 0 and all(ps >= T0 + 3 * D for _, ps, _, _, _, kind in raw if kind == 0)


def test_a_stale_hour_makes_every_bucket_its_runs_reached_stale(tmp_path):
    # Job 11 ran from 400 h before T0 to 50 h after it. A writer's mark() flags only its start hour, day and
    # month; the days it ran into must not be read from the rollup either, or its old GPU count would be summed.
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        s.execute("UPDATE jobs SET gpus = 5 WHERE job_id = 11")
        rollup.mark(s, [("dev", 11)])
        w = parse_window("2026-11-01", "2026-11-04")
        b = query._rollup_buckets(s, w, 5.0)
        assert not any(utc_days(b).values())  # Nov 1-3: job 11 ran into each
        assert not any(clean for lo, (_, clean) in b.hours.items() if lo < T0 + 50 * H)
        assert all(clean for lo, (_, clean) in b.hours.items() if lo >= T0 + 50 * H)  # after it: still read
        assert assert_same_as_full_query(s) > 100
        assert rollup.refresh(s) == 1  # its start hour: every day it ran in is recomputed
        assert_current(s)
        assert all(utc_days(query._rollup_buckets(s, w, 5.0)).values())


def test_a_run_without_seconds_on_a_period_edge_is_counted_once_in_its_period(tmp_path):
    # A job that failed as it started (start = end) exactly at midnight: a job of the day it started, in both paths.
    with wide_scenario(tmp_path / "s.db") as s:
        add_job(s, 40, user="dave", gpus=4, start=T0 + 24 * H, end=T0 + 24 * H)
        add_job(s, 41, user="dave", gpus=4, start=T0 + 24 * H + 7, end=T0 + 24 * H + 7)
        rollup.rebuild(s)
        w = parse_window("2026-11-01", "2026-11-03")
        for df in (run_aggregate(s, w, ["user"], "day", Scope()), full_query(s, w, ["user"], "day", Scope())):
            dave = df[df["user"] == "dave"]
            assert list(dave["period"]) == ["2026-11-02"] and list(dave["jobs"]) == [2]
            assert list(dave["gpu_hours"]) == [0.0]
        assert assert_same_as_full_query(s) > 100


def test_a_registered_zone_reads_one_bucket_per_local_day(tmp_path):
    # Europe/Berlin registered: its local days (24 hours, 25 on Oct 25 when DST ends) are buckets of
    # their own, sums of their hours; UTC days, weeks and months are read as before, and every figure is the same.
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s, zones=["Europe/Berlin"])
        assert rollup.zones(s) == ["Europe/Berlin"]
        w = parse_window("2026-10-20", "2026-11-10", tz="Europe/Berlin")
        cover, _ = query._rollup_plan(query._rollup_buckets(s, w, 5.0), periods(w, "day"), w.since)
        days = [(ps, pe) for _, ps, pe in periods(w, "day")]
        assert [(lo, hi) for _, lo, hi in cover] == days[:len(cover)] and cover[-1][2] > T0 + 3 * D  # last run: Nov 3
        assert {hi - lo for _, lo, hi in cover} == {24 * H, 25 * H}  # Oct 25: 25 hours
        assert assert_same_as_full_query(s) > 100
        months = s.execute("SELECT lo, hi, SUM(gpu_s) FROM usage_rollup WHERE hi - lo > 27 * 86400 "
                           "GROUP BY lo, hi").fetchall()  # UTC months: sums of UTC days only, not of Berlin's too
        for lo, hi, gpu_s in months:
            assert gpu_s == s.execute("SELECT SUM(gpu_s) FROM usage_rollup WHERE lo >= ? AND hi <= ? AND "
                                      "hi - lo = 3600", [lo, hi]).fetchone()[0]
        s.execute("UPDATE jobs SET gpus = 6 WHERE job_id = 9")  # a writer's change, then ingest's refresh
        rollup.mark(s, [("dev", 9)])
        rollup.refresh(s)
        assert_current(s)
        assert assert_same_as_full_query(s) > 100


def test_another_idle_threshold_is_not_read_from_the_rollup(tmp_path):
    with wide_scenario(tmp_path / "s.db") as s:
        rollup.rebuild(s)
        w = parse_window("2026-10-01", "2026-12-01")
        assert query._rollup_buckets(s, w, 5.0) is not None
        for pct in (1.5, 60.0):
            pd.testing.assert_frame_equal(run_aggregate(s, w, ["user"], "day", Scope(), pct),
                                          full_query(s, w, ["user"], "day", Scope(), pct), check_dtype=False,
                                          rtol=1e-12)


def job_rec(job_id: int, start: int, end: int, *, user: str = "alice", gpus: int = 2, run: int = 0) -> dict:
    return {"version": 1, "kind": "job", "cluster": "dev", "job_id": job_id, "run": run, "user_name": user,
            "account": "research", "partition": "gpu", "state": "COMPLETED", "submit_time": start - 600,
            "start_time": start, "end_time": end, "elapsed_s": end - start, "nodes": "gpu01", "node_count": 1,
            "gpus": gpus, "gpu_types": "a100", "source": "jobcomp"}


def test_ingest_keeps_the_rollup_current_in_either_arrival_order_and_on_reingest(tmp_path):
    sp, s = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    # node summaries before their job (21), a job before its summaries (22), one across midnight (23)
    spool.write(sp, "g21", gpus_rec(21, "gpu01", [0, 1]))
    assert ingest(s, sp).ingested == 1
    assert rollup_rows(s) == []  # no job yet: nothing to roll up, nothing dropped
    spool.write(sp, "j21", job_rec(21, T0 + 2 * H, T0 + 5 * H))
    spool.write(sp, "j22", job_rec(22, T0 + D + H, T0 + D + 3 * H, user="bob"))
    spool.write(sp, "j23", job_rec(23, T0 + 22 * H, T0 + 30 * H, user="carol"))
    assert ingest(s, sp).ingested == 3
    assert_current(s)
    day0 = {r[3]: r for r in rollup_rows(s) if r[:2] == (T0, T0 + D)}
    assert day0["alice"][9:12] == (1, 2 * 3 * 3600, 2 * 3 * 3600)  # jobs, gpu_s, measured_s: measured
    spool.write(sp, "g22", gpus_rec(22, "gpu01", [0, 1]))
    assert ingest(s, sp).ingested == 1
    assert_current(s)
    assert {r[3]: r[16] for r in rollup_rows(s) if r[:2] == (T0 + D, T0 + 2 * D)}["bob"] == 0  # no_metrics
    # the same job record again with a later start: it moves to the next day, counted once
    spool.write(sp, "j21b", job_rec(21, T0 + D + 2 * H, T0 + D + 5 * H))
    assert ingest(s, sp).ingested == 1
    assert_current(s)
    assert "alice" not in {r[3] for r in rollup_rows(s) if r[:2] == (T0, T0 + D)}
    assert assert_same_as_full_query(s) > 10


def test_gpus_upsert_marks_and_reports_stay_exact_until_refresh(tmp_path):
    sp, s = tmp_path / "spool", open_store(str(tmp_path / "a.db"))
    spool.write(sp, "j31", job_rec(31, T0 + H, T0 + 4 * H, user="carol"))
    assert ingest(s, sp).ingested == 1
    assert stale_buckets(s) == 0
    assert store_gpus.upsert(s, [gpus_rec(31, "gpu01", [0, 1])]) == 2  # reconcile's AdminComment path
    assert stale_buckets(s) == 3  # the hour job 31 starts in, its day and its month
    assert assert_same_as_full_query(s) > 0  # the stale day counted run by run: with the new metrics
    rollup.refresh(s)
    assert_current(s)


def test_reconcile_writes_keep_the_rollup_current(tmp_path):
    with open_store(str(tmp_path / "accounting.db")) as s:
        put_jobs(s, tmp_path, hook_rows(119, 124))  # a requeued job's old hook rows: renumbered by reconcile
        assert_current(s)
        res = reconcile.reconcile(s, SINCE, UNTIL, fetch=fetch, chunk_s=UNTIL - SINCE)
        assert {c.action for c in res.changes} >= {"insert", "renumber"}
        assert_current(s)


@pytest.mark.postgres
def test_rollup_on_postgresql(pg_schema_url):
    with scenario(pg_schema_url()) as s:
        assert s.dialect == "postgresql"
        rollup.rebuild(s)
        check_scenario_by_user(build("usage", s, parse_window("2026-11-01", "2026-11-02"), ["user"], None,
                                     Scope()))
        rollup.rebuild(add_wide(s))
        assert assert_same_as_full_query(s) > 100
        # a registered zone's local days, and a stale long run, on PostgreSQL too
        rollup.rebuild(s, zones=["Europe/Berlin"])
        s.execute("UPDATE jobs SET gpus = 5 WHERE job_id = 11")
        rollup.mark(s, [("dev", 11)])
        s.conn.commit()
        assert assert_same_as_full_query(s) > 100
        rollup.refresh(s)
        assert_current(s)
        assert assert_same_as_full_query(s) > 100


def test_sk_admin_rebuild_rollup_repairs_a_store_written_by_hand(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    path = tmp_path / "s.db"
    with wide_scenario(path) as s:
        rollup.rebuild(s)
        s.execute("UPDATE jobs SET gpus = 7 WHERE job_id = 3")  # hand SQL: no writer marked the day
        w = parse_window("2026-10-01", "2026-12-01")
        stale = run_aggregate(s, w, ["user"], "month", Scope())
        assert not stale.equals(full_query(s, w, ["user"], "month", Scope()))  # the rollup cannot know
        start_hours = s.execute(f"SELECT COUNT(DISTINCT start_time / {H}) FROM jobs").fetchone()[0]
    sk = str(Path(sys.executable).parent / "sk")
    run = subprocess.run([sk, "admin", "rebuild-rollup", "--store", str(path), "--json"], capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["hours_recomputed"] == start_hours
    with open_store(str(path)) as s:
        assert_current(s)
        assert assert_same_as_full_query(s) > 100
    missing = subprocess.run([sk, "admin", "rebuild-rollup", "--store", str(tmp_path / "none.db")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "there is no accounting store" in missing.stderr
    assert not (tmp_path / "none.db").exists()
    zoned = subprocess.run([sk, "admin", "rebuild-rollup", "--store", str(path), "--zone", "Europe/Berlin"],
                           capture_output=True, text=True)
    assert zoned.returncode == 0 and "local days of Europe/Berlin" in zoned.stdout, zoned.stderr
    with open_store(str(path)) as s:
        assert rollup.zones(s) == ["Europe/Berlin"]
        assert s.execute("SELECT COUNT(*) FROM rollup_buckets WHERE lo % 86400 <> 0 AND hi - lo >= 86400") \
            .fetchone()[0] > 0  # Berlin's days start at 22:00 or 23:00 UTC
    bad = subprocess.run([sk, "admin", "rebuild-rollup", "--store", str(path), "--zone", "Europe/Berln"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown time zone 'Europe/Berln'" in bad.stderr and "--zone" in bad.stderr
    assert "Traceback" not in bad.stderr
