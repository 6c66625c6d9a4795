"""Report figures against hand-computed values (scenario in tests/report_store.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_store import T0, H, add_gpus, add_job, check_scenario_by_user, scenario

from slurmkit.errors import InputError
from slurmkit.report.build import build
from slurmkit.report.query import Scope, parse_by
from slurmkit.report.window import parse_window

DAY = "--since", "2026-11-01", "--until", "2026-11-02"


def window():
    return parse_window("2026-11-01", "2026-11-02")


def rows(rep, key="user"):
    return {r[key]: r for _, r in rep.table.iterrows()}


def test_usage_by_user_hand_computed(tmp_path):
    check_scenario_by_user(build("usage", scenario(tmp_path / "a.db"), window(), ["user"], None, Scope()))


def test_period_split_counts_each_part_once(tmp_path):
    from slurmkit.store.db import open_store

    s = open_store(str(tmp_path / "p.db"))
    # 2 GPUs from day 1 20:00 to day 2 04:00: 4 h x 2 = 8 GPU-h in each day; the job counts once (day 1)
    add_job(s, 9, user="carol", gpus=2, start=T0 + 20 * H, end=T0 + 28 * H)
    rep = build("usage", s, parse_window("2026-11-01", "2026-11-03"), ["user"], "day", Scope())
    got = {r["period"]: (r["jobs"], r["gpu_hours"]) for _, r in rep.table.iterrows()}
    assert got == {"2026-11-01": (1, pytest.approx(8.0)), "2026-11-02": (0, pytest.approx(8.0))}
    assert rep.totals["jobs"] == 1 and rep.totals["gpu_hours"] == pytest.approx(16.0)


def test_time_zone_is_explicit(tmp_path):
    # 2026-11-01 in Europe/Berlin (CET, +01:00) starts at T0 - 1 h: job2 (T0-1h .. T0+1h) is fully inside -> 2 GPU-h
    w = parse_window("2026-11-01", "2026-11-02", tz="Europe/Berlin")
    assert w.since == T0 - H
    rep = build("usage", scenario(tmp_path / "a.db"), w, ["user"], None, Scope("alice"))
    # alice: job1 8 + job2 2 = 10 GPU-h
    assert rows(rep)["alice"]["gpu_hours"] == pytest.approx(10.0)
    assert "Europe/Berlin" in rep.notes[0]


def test_scope_restricts_to_own_jobs(tmp_path):
    rep = build("usage", scenario(tmp_path / "a.db"), window(), ["user"], None, Scope("bob"))
    assert set(rows(rep)) == {"bob"} and any("only your own jobs" in n for n in rep.notes)


def test_efficiency_states_thresholds(tmp_path):
    rep = build("efficiency", scenario(tmp_path / "a.db"), window(), [], None, Scope())
    assert any("A >= 70 %" in d and "F < 15 %" in d for d in rep.definitions)


def test_idle_lists_multi_gpu_job(tmp_path):
    rep = build("idle", scenario(tmp_path / "a.db"), window(), [], None, Scope())
    jobs = rep.extra["jobs"]
    assert list(jobs["job_id"]) == [1] and jobs.iloc[0]["idle_gpus"] == 2
    assert jobs.iloc[0]["idle_gpu_hours"] == pytest.approx(4.0)  # 2 GPUs x 2 h


def test_bad_by_and_window():
    with pytest.raises(InputError, match="cannot group by"):
        parse_by(["usr"])
    with pytest.raises(InputError, match="not after"):
        parse_window("2026-11-02", "2026-11-01")
    with pytest.raises(InputError, match="cannot read"):
        parse_window("yesterdy", None)


def test_last_month():
    from datetime import datetime, timezone

    w = parse_window("last-month", None, now=datetime(2026, 12, 2, 10, tzinfo=timezone.utc))
    assert (w.since, w.until) == (T0, T0 + 30 * 24 * H)  # November has 30 days


def sk(*args, env=None):
    return subprocess.run([str(Path(sys.executable).parent / "sk"), *args], capture_output=True, text=True, env=env)


def test_cli_json_and_empty(tmp_path):
    db = tmp_path / "a.db"
    scenario(db).close()
    out = sk("report", "usage", *DAY, "--db", str(db), "--format", "json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["totals"]["gpu_hours"] == pytest.approx(18.0) and data["simulated_metrics"] is True
    empty = sk("report", "usage", "--since", "2025-01-01", "--until", "2025-02-01", "--db", str(db))
    assert empty.returncode == 0 and "no GPU jobs between 2025-01-01 00:00 UTC and 2025-02-01 00:00 UTC" \
        in empty.stdout
    bad = sk("report", "usage", "--by", "usr", "--db", str(db))
    assert bad.returncode == 2 and "cannot group by" in bad.stderr and "Traceback" not in bad.stderr
    parquet = sk("report", "usage", *DAY, "--db", str(db), "--format", "parquet")
    assert parquet.returncode == 2 and "-o FILE" in parquet.stderr


def test_cli_job_verdict(tmp_path):
    db = tmp_path / "a.db"
    scenario(db).close()
    out = sk("report", "job", "1", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert "2 of 4 GPUs were idle" in out.stdout and "SIMULATED" in out.stdout
    out = sk("report", "job", "3", "--db", str(db))
    assert "utilization is unknown" in out.stdout
    out = sk("report", "job", "777", "--db", str(db))
    assert out.returncode == 1 and "not in the accounting store" in out.stderr


def test_array_tasks_count_per_allocation(tmp_path):
    from slurmkit.store.db import open_store

    s = open_store(str(tmp_path / "arr.db"))
    # array 100 with tasks 0..2, own job ids 101..103, each 1 GPU for 1 h -> 3 jobs, 3 GPU-h
    for task in range(3):
        add_job(s, 101 + task, user="dave", gpus=1, start=T0, end=T0 + H, array=(100, task))
        add_gpus(s, 101 + task, [60])
    rep = build("usage", s, window(), ["user"], None, Scope())
    d = rows(rep)["dave"]
    assert d["jobs"] == 3 and d["gpu_hours"] == pytest.approx(3.0) and d["gpu_hours_used"] == pytest.approx(1.8)


def test_no_metrics_is_unknown_never_zero(tmp_path):
    from slurmkit.store.db import open_store

    s = open_store(str(tmp_path / "alloc.db"))
    add_job(s, 1, user="erin", gpus=2, start=T0, end=T0 + 3 * H)  # allocation only, as from sacct
    rep = build("usage", s, window(), ["user"], None, Scope())
    e = rows(rep)["erin"]
    assert e["gpu_hours"] == pytest.approx(6.0) and e["jobs_no_metrics"] == 1
    for col in ("gpu_hours_used", "mean_util_pct", "gpu_hours_wasted", "idle_gpus_in_multi"):
        assert e[col] != e[col], col  # NaN: unknown, printed "-" and JSON null
    assert e["grade"] == "n/a" and rep.totals["jobs"] == 1 and isinstance(rep.totals["jobs"], int)


def test_snapshot_reader_never_reads_under_a_writer(tmp_path):
    """The admin-group reader of a closed WAL store (access.SnapshotStore): a query while a writer is active
    is refused (retried, then a clear error); after the writer closed, it reopens and sees the new rows."""
    from slurmkit.errors import StoreError
    from slurmkit.report.access import SnapshotStore, _open_snapshot
    from slurmkit.store.db import open_store

    db = tmp_path / "s.db"
    with open_store(str(db)) as s:
        add_job(s, 1, user="alice", start=T0, end=T0 + H)
    snap = _open_snapshot(db)
    assert isinstance(snap, SnapshotStore) and snap.execute("SELECT COUNT(*) FROM jobs").fetchone() == (1,)
    writer = open_store(str(db))
    add_job(writer, 2, user="bob", start=T0, end=T0 + H)  # committed into the -wal; the main file is stale
    snap.RETRIES = 2
    with pytest.raises(StoreError, match="kept changing"):
        snap.execute("SELECT COUNT(*) FROM jobs")
    writer.close()  # last connection: checkpoint into the main file, -wal removed
    assert snap.execute("SELECT COUNT(*) FROM jobs").fetchone() == (2,)


def test_narrow_window_shape_gives_the_same_figures(tmp_path, monkeypatch):
    """A window holding little of the store reads only its jobs' GPU rows (query.is_narrow): same figures."""
    import slurmkit.report.query as query

    store = scenario(tmp_path / "a.db")
    assert not query.is_narrow(store, window())  # the day holds nearly all of the scenario
    monkeypatch.setattr(query, "NARROW_SHARE", 10.0)
    assert query.is_narrow(store, window())
    check_scenario_by_user(build("usage", store, window(), ["user"], None, Scope()))


def test_relative_spans_back_from_now():
    from datetime import datetime, timezone

    now = datetime(2026, 11, 2, 12, tzinfo=timezone.utc)
    assert parse_window("90m", None, now=now).since == int(now.timestamp()) - 90 * 60  # minutes, as in sk admin
    assert parse_window("36h", None, now=now).since == int(now.timestamp()) - 36 * H
    assert parse_window("2w", None, now=now).since == int(now.timestamp()) - 14 * 24 * H


def test_control_characters_in_users_values_never_reach_the_terminal(tmp_path):
    """A job name with ESC/BEL/CR (an OSC title sequence), an account with CSI: escaped in the human-readable
    outputs (job, table, markdown), raw in JSON."""
    db = tmp_path / "a.db"
    s = scenario(db)
    evil = "x\x1b]0;owned\x07\r\x9b2J"
    add_job(s, 50, user="alice", account=evil, gpus=2, start=T0 + H, end=T0 + 2 * H)
    s.execute("UPDATE jobs SET job_name = ? WHERE job_id = 50", (evil,))
    add_gpus(s, 50, [0, 90], idle=[1.0, 0.0])
    s.conn.commit()
    s.close()
    outputs = [sk("report", "job", "50", "--db", str(db)).stdout]
    outputs += [sk("report", kind, *DAY, "--by", "account", "--db", str(db), "--format", fmt).stdout
                for kind in ("usage", "idle") for fmt in ("table", "markdown")]
    for out in outputs:
        assert "x\\x1b]0;owned\\x07\\r\\x9b2J" in out, out
        assert not any(c in out for c in "\x1b\x07\r\x9b"), out
    raw = json.loads(sk("report", "usage", *DAY, "--by", "account", "--db", str(db), "--format", "json").stdout)
    def values(x):
        return [v for i in x.values() for v in values(i)] if isinstance(x, dict) else \
            [v for i in x for v in values(i)] if isinstance(x, list) else [x]
    assert evil in values(raw), raw


def test_csv_opens_in_pandas_as_is_and_parquet_keeps_the_window(tmp_path):
    import pandas as pd
    import pyarrow.parquet as pq

    db = tmp_path / "a.db"
    scenario(db).close()
    out = sk("report", "usage", *DAY, "--by", "user", "--db", str(db), "--format", "csv", "-o", str(tmp_path / "u.csv"))
    assert out.returncode == 0, out.stderr
    df = pd.read_csv(tmp_path / "u.csv")
    data = json.loads(sk("report", "usage", *DAY, "--by", "user", "--db", str(db), "--format", "json").stdout)
    assert sorted(df["user"]) == sorted(r["user"] for r in data["rows"])
    meta = json.loads((tmp_path / "u.csv.meta.json").read_text())
    assert meta["since"] == "2026-11-01 00:00 UTC" and meta["tz"] == "UTC" and meta["definitions"]
    stdout = sk("report", "usage", *DAY, "--by", "user", "--db", str(db), "--format", "csv")
    assert not stdout.stdout.startswith("#") and "# " in stdout.stderr  # notes beside the data, not in it
    assert sk("report", "usage", *DAY, "--db", str(db), "--format", "parquet", "-o", str(tmp_path / "u.parquet")
              ).returncode == 0
    pmeta = json.loads(pq.read_schema(tmp_path / "u.parquet").metadata[b"slurmkit"])
    assert (pmeta["since_epoch"], pmeta["until_epoch"]) == (data["since_epoch"], data["until_epoch"])
    assert pmeta["tz"] == "UTC"
    assert pmeta["simulated_metrics"] is True


def test_a_report_by_total_prints_its_row_once(tmp_path):
    db = tmp_path / "a.db"
    scenario(db).close()
    text = sk("report", "idle", *DAY, "--db", str(db)).stdout
    assert text.startswith("GPU idle report by total"), text
    table = text.split("jobs with idle GPUs:")[0].splitlines()
    header = next(i for i, line in enumerate(table) if line.startswith("----"))
    assert len([line for line in table[header + 1:] if line.strip()]) == 1, text


def test_report_job_of_an_array_id_shows_every_task_and_the_total(tmp_path):
    from slurmkit.store.db import open_store

    db = tmp_path / "arr.db"
    s = open_store(str(db))
    # array 200: tasks 0..2 have their own job ids 201..203; task 1 failed with an idle GPU
    for task, (state, util) in enumerate([("COMPLETED", 80), ("FAILED", 1), ("COMPLETED", 70)]):
        add_job(s, 201 + task, user="dave", gpus=1, start=T0, end=T0 + H, array=(200, task), state=state)
        add_gpus(s, 201 + task, [util])
    s.close()
    out = sk("report", "job", "200", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert [line.split(":")[0] for line in out.stdout.splitlines() if line.startswith("job ")] == [
        "job 201 (array 200_0) on dev", "job 202 (array 200_1) on dev", "job 203 (array 200_2) on dev"]
    assert "total: 3 runs (2 COMPLETED, 1 FAILED), 3.00 GPU-h, 1 of 3 measured GPUs idle" in out.stdout
    one = sk("report", "job", "200_1", "--db", str(db))
    assert one.returncode == 0 and "job 202 (array 200_1)" in one.stdout and "total:" not in one.stdout


def test_columns_chooses_and_orders_the_figures_and_names_the_valid_ones(tmp_path):
    db = tmp_path / "a.db"
    scenario(db).close()
    out = sk("report", "usage", *DAY, "--db", str(db), "--columns", "gpu_hours,jobs", "--no-freshness",
             "--format", "csv")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "user,gpu_hours,jobs"
    text = sk("report", "usage", *DAY, "--db", str(db), "--columns", "jobs", "--no-freshness").stdout
    assert "definitions:\n  jobs: " in text and "GPU-h:" not in text
    bad = sk("report", "efficiency", *DAY, "--db", str(db), "--columns", "jobs,waste")
    assert bad.returncode == 2 and "unknown column 'waste' for the efficiency report" in bad.stderr
    assert "waste_pct" in bad.stderr and "Traceback" not in bad.stderr


def test_every_store_report_says_when_it_was_last_ingested(tmp_path):
    db = tmp_path / "a.db"
    scenario(db).close()
    data = json.loads(sk("report", "usage", *DAY, "--db", str(db), "--format", "json").stdout)
    fresh = data["freshness"]
    assert fresh["last_ingest"] is not None or any("last ingested: never" in n for n in data["notes"])
    assert any(n.startswith("store last ingested: ") for n in data["notes"])
    # compared with Slurm, or saying why not: never silent about what the store may lack
    assert (fresh["slurm_gpu_jobs"] is None) == (fresh["why_not"] is not None)
    assert not any(n.startswith("store last ingested") for n in json.loads(sk(
        "report", "usage", *DAY, "--db", str(db), "--format", "json", "--no-freshness").stdout)["notes"])


def _table(text):
    """The header line and the rows of a text report's table (between the dashes line and 'definitions:')."""
    lines = text.splitlines()
    dash = next(i for i, line in enumerate(lines) if line.startswith("----"))
    end = next((i for i, line in enumerate(lines) if i > dash and (not line.strip() or line.endswith(":"))),
               len(lines))
    return lines[dash - 1], lines[dash + 1:end]


@pytest.mark.parametrize("kind", ["usage", "efficiency", "top", "idle"])
def test_tables_fit_the_terminal_and_name_what_they_left_out(tmp_path, kind):
    import os

    db = tmp_path / "a.db"
    s = scenario(db)
    add_job(s, 9, user="carol", account="a-very-long-account-name-of-a-research-group", gpus=2, start=T0 + H,
            end=T0 + 3 * H)
    add_gpus(s, 9, [60, 60], idle=[0.2, 0.2], source="nvml")
    s.close()
    args = ("report", kind, *DAY, "--db", str(db), "--by", "account,user", "--no-freshness")
    for width in (100, 80):
        env = {**os.environ, "COLUMNS": str(width)}
        text = sk(*args, env=env).stdout
        assert max(len(line) for line in text.splitlines()) <= width, text
        header, rows = _table(text)
        # this table is wider than either: one note says what was left out and shortened, and it is so
        note = [n for n in text.replace("\n  ", " ").splitlines() if n.startswith(f"to fit {width} columns: ")]
        assert len(note) == 1, text
        labels = note[0].split("left out ", 1)[1].split(";")[0].split(" (--columns")[0].split(", ")
        assert labels and not any(f"  {label}  " in f"  {header}  " for label in labels)
        if width == 80:
            assert "account names shortened to" in note[0]
            names = [r.split()[0] for r in rows]
            assert any(n.startswith("a-ver") and "~" in n and n.endswith("group") for n in names), rows
    # rows from different metric sources keep their source column, however narrow the terminal
    if kind in ("usage", "efficiency"):
        header, rows = _table(sk(*args, env={**os.environ, "COLUMNS": "80"}).stdout)
        assert "source" in header.split() and {"simulated", "nvml"} <= {r.split()[-1] for r in rows}
    # --columns shows exactly what was asked, whatever the width; csv always has every column
    full = sk(*args, "--columns", "jobs,gpu_hours,share_pct,gpu_hours_used,gpu_hours_wasted,mean_util_pct",
              env={**os.environ, "COLUMNS": "60"})
    if kind in ("efficiency", "idle"):
        assert full.returncode == 2 and "share_pct" in full.stderr  # not one of their figures: exit 2, the valid
        assert "Traceback" not in full.stderr                       # ones named
    else:
        assert _table(full.stdout)[0].split() == ["account", "user", "jobs", "GPU-h", "share", "%", "used",
                                                   "GPU-h", "wasted", "GPU-h", "util", "%"]
        assert "left out" not in full.stdout
    csv = sk(*args, "--format", "csv", env={**os.environ, "COLUMNS": "60"}).stdout.splitlines()[0].split(",")
    assert "gpu_hours_unmeasured" in csv or kind != "usage"
