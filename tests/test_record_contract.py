"""The record contract (slurmkit/record.py) against what holds it in place: the migrated tables (SQLite and
PostgreSQL), the node record the epilog writes, the site config's metric sources, the per-source counts of the
reports (any number of sources, any count), node_type at ingest, migration 0005 and the transaction helper."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from report_store import T0, H, add_gpus, add_job, scenario

from slurmkit import record
from slurmkit.accounting import gpusummary, hooks, spool
from slurmkit.accounting.ingest import ingest
from slurmkit.errors import SiteConfigError
from slurmkit.report.build import build
from slurmkit.report.job import load_job
from slurmkit.report.query import Scope, run_aggregate
from slurmkit.report.window import parse_window
from slurmkit.site.model import load_site
from slurmkit.store import rollup
from slurmkit.store.db import apply_migrations, open_store

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
DEVSITE = ROOT / "site_config" / "devcluster.yaml"


def columns(store, table: str) -> list[tuple[str, str]]:
    """(name, declared type) of `table`'s columns in table order, upper case, as the migrations wrote them."""
    if store.dialect == "sqlite":
        return [(r[1], r[2].upper()) for r in store.execute(f"PRAGMA table_info({table})").fetchall()]
    rows = store.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? "
                         "AND table_schema = current_schema() ORDER BY ordinal_position", [table]).fetchall()
    return [(name, kind.upper()) for name, kind in rows]


def sql_type(field: record.Field, dialect: str) -> str:
    return field.sql if dialect == "sqlite" else {"TEXT": "TEXT", "BIGINT": "BIGINT", "INTEGER": "INTEGER",
                                                   "DOUBLE PRECISION": "DOUBLE PRECISION"}[field.sql]


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request, tmp_path):
    url = str(tmp_path / "s.db") if request.param == "sqlite" else request.getfixturevalue("pg_schema_url")()
    with open_store(url) as store:
        yield store


def test_the_migrated_tables_are_the_records_fields(any_store):
    """Name and type of every column (not their order: a migration adds a column at the end of the table, and
    every statement names its columns)."""
    s = any_store
    jobs = {f.column: sql_type(f, s.dialect) for f in record.JOB_FIELDS}
    gpus = {f.column: sql_type(f, s.dialect)
            for f in (*record.GPU_RECORD_FIELDS, *record.GPU_FIELDS, *record.GPU_ROW_FIELDS)}
    assert dict(columns(s, "jobs")) == jobs
    assert dict(columns(s, "job_gpus")) == gpus
    assert set(gpus) == set(record.GPU_COLUMNS) and set(jobs) == set(record.JOB_COLUMNS)


def test_the_node_record_carries_exactly_the_gpu_fields_and_they_reach_the_report(tmp_path):
    gpu = {"index": 3, "uuid": "GPU-x", "pci_bus_id": "00000000:07:00.0", "model": "A100", "util_mean": 42.0,
           "util_max": 99.0, "idle_fraction": 0.25, "mem_max_mib": 1234, "mem_total_mib": 81920,
           "energy_j": 5.5e5, "power_max_w": 390.0, "samples": 77, "not-a-field": 1}
    rec = gpusummary.node_record(cluster="dev", job_id=7, run=0, node="gpu01", source="nvml", interval_s=10,
                                 gpus=[gpu], flags=[], ended=T0 + H)
    assert rec["kind"] == record.GPUS_KIND and rec["version"] == record.GPUS_VERSION
    assert list(rec["gpus"][0]) == [f.name for f in record.GPU_FIELDS]  # the extra key is dropped
    assert rec["idle_threshold_pct"] == record.IDLE_UTIL_PCT
    sp = tmp_path / "spool"
    spool.write(sp, "g7", rec)
    with open_store(str(tmp_path / "s.db")) as s:
        assert ingest(s, sp).ingested == 1
        add_job(s, 7, user="alice", start=T0, end=T0 + H)
        [run] = load_job(s, "7", Scope())
    shown = run.gpus[0]
    assert list(shown) == list(record.GPU_REPORT_COLUMNS)
    assert shown == {"node": "gpu01", **{f.column: gpu.get(f.name) for f in record.GPU_FIELDS if f.report},
                     "source": "nvml"}


def site_with_source(tmp_path, name: str) -> Path:
    d = yaml.safe_load(DEVSITE.read_text())
    d.setdefault("accounting", {})["metric_source"] = name
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_the_site_config_offers_exactly_the_registered_sources(tmp_path):
    for name in ("auto", *record.SOURCE_NAMES):
        assert load_site(site_with_source(tmp_path, name)).accounting.metric_source == name
    names = ["auto", *record.SOURCE_NAMES]
    listed = ", ".join(f"'{n}'" for n in names[:-1]) + f" or '{names[-1]}'"
    with pytest.raises(SiteConfigError, match=f"Input should be {listed} \\(got 'unregistered'\\)"):
        load_site(site_with_source(tmp_path, "unregistered"))


def test_every_node_source_is_implemented_where_the_registry_says():
    from slurmkit.accounting import metrics

    assert tuple(s.name for s in record.METRIC_SOURCES if s.on_node) == metrics.SOURCES
    for source in record.METRIC_SOURCES:
        if source.on_node:
            assert callable(importlib.import_module(source.module).make)
        else:
            with pytest.raises(metrics.SourceUnavailable, match="not a node metric source"):
                metrics.open_source(source.name, key="dev/1/0", node="gpu01", interval_s=10)
    with pytest.raises(metrics.SourceUnavailable, match="unknown metric source 'unregistered'"):
        metrics.open_source("unregistered", key="dev/1/0", node="gpu01", interval_s=10)
    simulated = metrics.open_source("simulated", key="dev/1/0", node="gpu01", interval_s=10)
    assert simulated.name == "simulated" and not record.BY_SOURCE["simulated"].real


def five_sources(path) -> object:
    """Job 1: 70,000 GPU rows from nvml (more than the 16 bits per source the old packed counter had) and 3 from
    dcgm; job 2: one row from each of slurm, simulated and a fifth source, "unregistered"; 2026-11-01 UTC."""
    s = open_store(str(path))
    add_job(s, 1, user="alice", gpus=8, start=T0 + H, end=T0 + 3 * H)
    s.conn.executemany(
        "INSERT INTO job_gpus (cluster, job_id, run, node, gpu_index, util_mean, idle_fraction, source) "
        "VALUES ('dev', 1, 0, ?, ?, 50.0, 0.0, ?)",
        [(f"n{i // 8}", i % 8, "nvml") for i in range(70_000)] + [("d0", i, "dcgm") for i in range(3)])
    add_job(s, 2, user="bob", gpus=3, start=T0 + 5 * H, end=T0 + 6 * H)
    for i, src in enumerate(("slurm", "simulated", "unregistered")):
        add_gpus(s, 2, [10.0], source=src, node=f"gpu0{i}")
    return s


EXPECTED = {"n_nvml": 70_000, "n_dcgm": 3, "n_slurm": 1, "n_simulated": 1, "n_unregistered": 1}


@pytest.mark.parametrize("path", ["rollup", "every run"])
def test_a_fifth_source_and_large_counts_are_counted_exactly(tmp_path, path):
    with five_sources(tmp_path / "s.db") as s:
        if path == "rollup":
            rollup.rebuild(s)
        w = parse_window("2026-11-01", "2026-11-02")
        df = run_aggregate(s, w, ["user"], None, Scope(), every_run=path == "every run")
        got = {r["user"]: {c: int(r[c]) for c in EXPECTED} for _, r in df.iterrows()}
        assert got == {"alice": {**dict.fromkeys(EXPECTED, 0), "n_nvml": 70_000, "n_dcgm": 3},
                       "bob": {**dict.fromkeys(EXPECTED, 0), "n_slurm": 1, "n_simulated": 1, "n_unregistered": 1}}
        # registered sources in the registry's order, then any other found in the store
        registered = [f"n_{n}" for n in record.SOURCE_NAMES]
        assert [c for c in df.columns if c.startswith("n_")] == [*registered, "n_unregistered"]
        rep = build("usage", s, w, ["user"], None, Scope())
    assert {c: rep.totals[c] for c in EXPECTED} == EXPECTED
    assert dict(zip(rep.table["user"], rep.table["sources"], strict=True)) == {
        "alice": "nvml, dcgm", "bob": "slurm, simulated, unregistered"}
    assert ("metric sources: nvml (70000 GPU records), dcgm (3 GPU records), slurm (1 GPU records), "
            "simulated (1 GPU records), unregistered (1 GPU records)") in rep.notes
    assert any("SIMULATED" in n for n in rep.notes)  # the registry says simulated is not real


def test_a_registered_fifth_source_takes_its_place_and_its_kind(tmp_path, monkeypatch):
    """Registered (here: patched into the registry as not real), the fifth source is listed in registry order,
    before the unregistered ones, and its numbers raise the SIMULATED banner like simulated's."""
    from slurmkit.report import build as build_mod
    from slurmkit.report import query

    fifth = record.MetricSource("unregistered", real=False)
    monkeypatch.setattr(query, "SOURCE_NAMES", (*record.SOURCE_NAMES[:1], "unregistered", *record.SOURCE_NAMES[1:]))
    monkeypatch.setattr(build_mod, "BY_SOURCE", {**record.BY_SOURCE, "unregistered": fifth})
    with five_sources(tmp_path / "s.db") as s:
        s.execute("DELETE FROM job_gpus WHERE source = 'simulated'")
        rollup.rebuild(s)
        rep = build("usage", s, parse_window("2026-11-01", "2026-11-02"), ["user"], None, Scope())
    assert [c for c in rep.table.columns if c.startswith("n_")] == [
        "n_nvml", "n_unregistered", "n_dcgm", "n_slurm", "n_simulated"]
    assert rep.totals["n_unregistered"] == 1 and rep.totals["n_simulated"] == 0
    assert dict(zip(rep.table["user"], rep.table["sources"], strict=True))["bob"] == "unregistered, slurm"
    assert any("SIMULATED" in n for n in rep.notes)


def test_a_period_split_counts_a_runs_sources_once(tmp_path):
    """A run across two periods: its GPU records count in the period it started in, through the rollup (a run
    ending after the period is added back with first = 0) as without it."""
    with open_store(str(tmp_path / "s.db")) as s:
        add_job(s, 1, user="alice", gpus=2, start=T0 + 20 * H, end=T0 + 30 * H)
        add_gpus(s, 1, [50.0, 60.0], source="unregistered")
        rollup.rebuild(s)
        w = parse_window("2026-11-01", "2026-11-03")
        for every_run in (False, True):
            df = run_aggregate(s, w, [], "day", Scope(), every_run=every_run)
            assert list(df["n_unregistered"]) == [2, 0] and list(df["jobs"]) == [1, 0]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migration_0005_moves_the_source_columns_into_rows(request, tmp_path, dialect):
    """A store as the previous slurmkit left it (version 4: the rollup's per-source counts in columns n_nvml ..
    n_simulated), migrated: the same counts as rows of usage_rollup_sources, the columns gone, the buckets still
    clean, the report unchanged. The version 4 rollup is the one a current store computes for the same rows."""
    urls = [str(tmp_path / f"{n}.db") for n in ("new", "old")] if dialect == "sqlite" else \
        [request.getfixturevalue("pg_schema_url")() for _ in range(2)]
    new = scenario(urls[0])
    rollup.rebuild(new)
    w = parse_window("2026-11-01", "2026-11-02")
    want = build("usage", new, w, ["user"], None, Scope()).totals
    key = ["lo", "hi", *rollup.KEY_COLUMNS]
    counts = sorted(tuple(r) for r in new.execute(f"SELECT {', '.join(key)}, source, gpu_records "
                                                   "FROM usage_rollup_sources").fetchall())
    assert {r[-2] for r in counts} == {"simulated", "nvml"}

    old = open_store(urls[1], migrate=False)
    apply_migrations(old, upto=4)
    v4 = {c for c, _ in columns(old, "usage_rollup")}
    assert {"n_nvml", "n_dcgm", "n_slurm", "n_simulated"} <= v4
    sums = [c for c in rollup.SUM_COLUMNS if c in v4]
    by_key: dict[tuple, dict[str, int]] = {}
    for *k, src, n in counts:
        by_key.setdefault(tuple(k), {})[src] = n
    with old.transaction() as cur:
        for table in ("jobs", "job_gpus", "rollup_buckets"):
            cols = [c for c, _ in columns(old, table)]
            rows = new.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall()
            cur.executemany(old.sql(f"INSERT INTO {table} ({', '.join(cols)}) VALUES "
                                    f"({', '.join('?' for _ in cols)})"), rows)
        names = [*key, *sums, "n_nvml", "n_dcgm", "n_slurm", "n_simulated"]
        for row in new.execute(f"SELECT {', '.join([*key, *sums])} FROM usage_rollup").fetchall():
            n = by_key.get(tuple(row[:len(key)]), {})
            cur.execute(old.sql(f"INSERT INTO usage_rollup ({', '.join(names)}) VALUES "
                                f"({', '.join('?' for _ in names)})"),
                        [*row, *(n.get(src, 0) for src in ("nvml", "dcgm", "slurm", "simulated"))])
    apply_migrations(old, upto=5)
    assert not {c for c, _ in columns(old, "usage_rollup")} & {"n_nvml", "n_dcgm", "n_slurm", "n_simulated"}
    assert sorted(tuple(r) for r in old.execute(f"SELECT {', '.join(key)}, source, gpu_records "
                                                "FROM usage_rollup_sources").fetchall()) == counts
    assert old.execute("SELECT COUNT(*) FROM rollup_buckets WHERE stale = 1").fetchone()[0] == 0
    # version 7 drops the rows (time spread over hours since) and marks the hours stale: run by run until refreshed
    apply_migrations(old)
    assert old.execute("SELECT COUNT(*) FROM usage_rollup_sources").fetchone()[0] == 0
    got = build("usage", old, w, ["user"], None, Scope()).totals
    assert got == want and got["n_simulated"] == 5 and got["n_nvml"] == 2
    rollup.refresh(old)
    assert old.execute("SELECT COUNT(*) FROM rollup_buckets WHERE stale = 1").fetchone()[0] == 0
    assert build("usage", old, w, ["user"], None, Scope()).totals == want
    new.close()
    old.close()


def hook_record(job_id: int, partition: str) -> dict:
    env = {"JOBID": str(job_id), "CLUSTER": "devcluster", "JOBSTATE": "COMPLETED", "PARTITION": partition,
           "USERNAME": "alice", "UID": "1001", "SUBMIT": str(T0), "START": str(T0 + 60), "END": str(T0 + H),
           "NODES": "gpu01", "NODECNT": "1", "PROCS": "8"}
    show = {"TRES": "cpu=8,gres/gpu=2,gres/gpu:a100=2", "Restarts": "0", "SubmitTime": str(T0)}
    return hooks.jobcomp_record(env, show)


def test_ingest_writes_node_type_from_the_site_partition_map(tmp_path):
    """`sk admin ingest --site`: the hook's record has no node_type (it never reads the site config); the row
    gets the partition's node type, and `sk report --by node_type` groups by it."""
    sp, db = tmp_path / "spool", tmp_path / "s.db"
    assert "node_type" not in hook_record(1, "gpu")
    spool.write(sp, "job-1", hook_record(1, "gpu"))
    spool.write(sp, "job-2", hook_record(2, "nosuch"))  # a partition the site does not describe
    res = subprocess.run([SK, "admin", "ingest", "--site", str(DEVSITE), "--spool", str(sp), "--store", str(db)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with open_store(str(db)) as s:
        assert dict(s.execute("SELECT job_id, node_type FROM jobs ORDER BY job_id").fetchall()) == {
            1: "devnode", 2: None}
        rep = build("usage", s, parse_window("2026-11-01", "2026-11-02"), ["node_type"], None, Scope())
    assert dict(zip(rep.table["node_type"], rep.table["jobs"], strict=True)) == {"devnode": 1, "(none)": 1}


def test_ingest_without_a_site_config_says_node_type_is_missing(tmp_path):
    sp, db = tmp_path / "spool", tmp_path / "s.db"
    spool.write(sp, "job-1", hook_record(1, "gpu"))
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # no ~/.config/slurmkit, no $SK_SITE
    res = subprocess.run([SK, "admin", "ingest", "--spool", str(sp), "--store", str(db)], capture_output=True,
                         text=True, env=env)
    if Path("/etc/slurmkit/site.yaml").exists():
        pytest.skip("this machine has a system site config")
    assert res.returncode == 0 and "without their node type" in res.stderr and "pass --site" in res.stderr
    with open_store(str(db)) as s:
        assert s.execute("SELECT node_type FROM jobs").fetchall() == [(None,)]


def test_the_report_groups_by_the_node_type_ingest_named(tmp_path):
    """The report fixture writes rows as ingest does (tests/report_store.py: node_type from the devcluster
    site's partitions, never by hand): every scenario job is in partition gpu, node type devnode."""
    rep = build("usage", scenario(tmp_path / "a.db"), parse_window("2026-11-01", "2026-11-02"), ["node_type"],
                None, Scope())
    assert list(rep.table["node_type"]) == ["devnode"] and rep.totals["gpu_hours"] == pytest.approx(18.0)


def test_a_transaction_commits_once_or_leaves_nothing(any_store):
    s = any_store
    with pytest.raises(RuntimeError), s.transaction() as cur:
        cur.execute(s.sql("INSERT INTO rollup_buckets (lo, hi, stale) VALUES (?, ?, 1)"), [0, 3600])
        raise RuntimeError("writer failed halfway")
    assert s.execute("SELECT COUNT(*) FROM rollup_buckets").fetchone()[0] == 0
    s.end_read()
    with s.transaction() as cur:
        cur.execute(s.sql("INSERT INTO rollup_buckets (lo, hi, stale) VALUES (?, ?, 1)"), [0, 3600])
    with open_store(s.url) as other:  # another connection sees it: committed
        assert other.execute("SELECT COUNT(*) FROM rollup_buckets").fetchone()[0] == 1


def test_a_job_name_that_is_not_utf8_is_stored_with_its_bytes_recoverable_and_stops_nothing(tmp_path):
    """Slurm lets a job name hold any byte. The hook's environment keeps one that is not UTF-8 as a lone surrogate
    (surrogateescape); the hook writes it as \\xNN, so ingest stores it and goes on with the next record."""
    env = {"CLUSTER": "dev", "JOBID": "41", "JOBSTATE": "COMPLETED", "SUBMIT": str(T0), "START": str(T0),
           "END": str(T0 + 60), "NODES": "gpu01", "NODECNT": "1", "PROCS": "1", "USERNAME": "alice", "UID": "1001",
           "JOBNAME": b"bad\xff\xfename\x1b]0;t\x07".decode("utf-8", "surrogateescape")}
    sp = tmp_path / "spool"
    spool.write(sp, "job-dev-41-0-1", hooks.jobcomp_record(env, None))
    spool.write(sp, "job-dev-42-0-2", hooks.jobcomp_record({**env, "JOBID": "42", "JOBNAME": "next"}, None))
    with open_store(str(tmp_path / "s.db")) as s:
        res = ingest(s, sp)
        assert (res.ingested, res.quarantined) == (2, 0)
        names = dict(s.execute("SELECT job_id, job_name FROM jobs").fetchall())
    assert names == {41: "bad\\xff\\xfename\x1b]0;t\x07", 42: "next"}
    assert names[41].encode().decode("unicode_escape").encode("latin-1") == b"bad\xff\xfename\x1b]0;t\x07"
    assert record.storable({"job_name": "plain é"}) == {"job_name": "plain é"}
