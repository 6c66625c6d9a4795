"""The report figures on a real PostgreSQL (contrib/devcluster/pg-up): the same portable SQL and the same
hand-computed values as the SQLite tests in tests/test_report.py. Each test gets its own schema (conftest's
pg_schema_url), dropped afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_store import T0, H, add_gpus, add_job, check_scenario_by_user, scenario

from slurmkit.report.build import build
from slurmkit.report.query import Scope, util_histogram
from slurmkit.report.window import parse_window

pytestmark = pytest.mark.postgres


def window():
    return parse_window("2026-11-01", "2026-11-02")


def test_usage_by_user_hand_computed(pg_schema_url):
    url = pg_schema_url()
    with scenario(url) as s:
        assert s.dialect == "postgresql"
        check_scenario_by_user(build("usage", s, window(), ["user"], None, Scope()))


def test_period_split_time_zone_and_scope(pg_schema_url):
    with scenario(pg_schema_url()) as s:
        add_job(s, 9, user="carol", gpus=2, start=T0 + 20 * H, end=T0 + 28 * H)  # 8 GPU-h on each of two days
        s.conn.commit()
        rep = build("usage", s, parse_window("2026-11-01", "2026-11-03"), ["user"], "day", Scope("carol"))
        got = {r["period"]: (r["jobs"], r["gpu_hours"]) for _, r in rep.table.iterrows()}
        assert got == {"2026-11-01": (1, pytest.approx(8.0)), "2026-11-02": (0, pytest.approx(8.0))}
        # Europe/Berlin's 2026-11-01 starts at T0 - 1 h: alice's job 2 is then fully inside (8 + 2 GPU-h)
        rep = build("usage", s, parse_window("2026-11-01", "2026-11-02", tz="Europe/Berlin"), ["user"], None,
                    Scope("alice"))
        assert list(rep.table["user"]) == ["alice"] and rep.table.iloc[0]["gpu_hours"] == pytest.approx(10.0)


def test_idle_jobs_histogram_and_arrays(pg_schema_url):
    with scenario(pg_schema_url()) as s:
        for task in range(3):  # array 100: three tasks with their own job ids, 1 GPU x 1 h at 60 %
            add_job(s, 101 + task, user="dave", gpus=1, start=T0, end=T0 + H, array=(100, task))
            add_gpus(s, 101 + task, [60])
        s.conn.commit()
        idle = build("idle", s, window(), [], None, Scope()).extra["jobs"]
        assert list(idle["job_id"]) == [1] and idle.iloc[0]["idle_gpus"] == 2
        assert idle.iloc[0]["idle_gpu_hours"] == pytest.approx(4.0)
        d = build("usage", s, window(), ["user"], None, Scope()).table.set_index("user").loc["dave"]
        assert d["jobs"] == 3 and d["gpu_hours"] == pytest.approx(3.0) and d["gpu_hours_used"] == pytest.approx(1.8)
        # measured GPU-hours per utilization bin: 0 % (job 1's two idle GPUs, 2 x 2 h), 50 % (job 2, 1 h),
        # 60 % (the array, 3 h), 80 % (job 1's busy GPUs, 4 h), 100 % (job 4's runs, 3 h; 100 % is in the top bin)
        hist = dict(zip(util_histogram(s, window(), Scope())["bin"], util_histogram(s, window(), Scope())["gpu_hours"],
                        strict=True))
        assert hist == {0: 4.0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 1.0, 6: 3.0, 7: 0, 8: 4.0, 9: 3.0}


def test_cli_reads_postgres_url(pg_schema_url):
    url = pg_schema_url()
    scenario(url).close()
    out = subprocess.run([str(Path(sys.executable).parent / "sk"), "report", "usage", "--since", "2026-11-01",
                          "--until", "2026-11-02", "--db", url, "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {r["user"]: r["gpu_hours"] for r in data["rows"]} == {"alice": 9.0, "bob": 9.0}
    assert data["totals"]["jobs"] == 5
