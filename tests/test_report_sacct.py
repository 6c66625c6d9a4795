"""`sk report --from-sacct` on recorded real sacct output (tests/data/accounting/sacct-report-allocations.txt,
see the README there), figures hand-computed from the recorded rows. The same on the live devcluster:
tests/integration/test_report_sacct_on_devcluster.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit.errors import InputError
from slurmkit.report.build import build
from slurmkit.report.formats import as_dict, render_text
from slurmkit.report.query import Scope
from slurmkit.report.sacct_source import memory_store, open_sacct, records
from slurmkit.report.window import Window
from slurmkit.slurm.sacct import DELIMITER, FIELDS

DATA = Path(__file__).parent / "data" / "accounting" / "sacct-report-allocations.txt"
T = 1796283862  # Submit/Start of most recorded jobs (2026-12-03 07:44:22 UTC)


def recorded_rows() -> list[dict[str, str]]:
    """The recorded rows as dicts keyed by the header, whatever order FIELDS has today."""
    header, *lines = DATA.read_text().splitlines()
    names = header.split("|")
    return [dict(zip(names, line.split("|", len(names) - 1), strict=True)) for line in lines if line]


def window(since: int = T - 3600, until: int = T + 3600) -> Window:
    from datetime import timezone

    return Window(since, until, timezone.utc, "UTC")


def report(scope: Scope | None = None, w=None, keys=("user",), kind="usage", **kw):
    scope = scope or Scope()
    store = memory_store(records(recorded_rows(), scope))
    return build(kind, store, w or window(), list(keys), None, scope, source="sacct", **kw)


def by_user(rep):
    return {r["user"]: r for _, r in rep.table.iterrows()}


def test_records_are_ended_gpu_runs_with_requeues_numbered():
    recs = {(r["job_id"], r["run"]): r for r in records(recorded_rows(), Scope())}
    # 144 is still RUNNING (End=Unknown): not a record until it ends; 139 never started
    assert 144 not in {j for j, _ in recs}
    assert recs[(139, 0)]["gpus"] == 0 and recs[(139, 0)]["start_time"] is None
    # the requeued job: two runs, each its own allocation with its own submit/start/end
    assert (recs[(138, 0)]["state"], recs[(138, 1)]["state"]) == ("REQUEUED", "COMPLETED")
    assert recs[(138, 1)]["submit_time"] == T + 6 and recs[(138, 1)]["start_time"] == T + 132
    # array tasks are their own allocations (task 2 carries the array's id as its own job id)
    assert {recs[(j, 0)]["array_task_id"] for j in (140, 141, 136)} == {0, 1, 2}
    assert recs[(137, 0)]["gpus"] == 4 and recs[(137, 0)]["node_count"] == 2  # 2 nodes x 2 GPUs
    assert all(r["source"] == "sacct" for r in recs.values())


def test_usage_hand_computed_from_the_recorded_rows():
    rep = report()
    u = by_user(rep)
    # root: 137 4 GPUs x 4 s = 16; 138 run 0 2 x 6 = 12, run 1 2 x 15 = 30; array 3 x (1 x 3 s) = 9 -> 67 GPU-s
    # alice: 142 3 GPUs x 6 s = 18 GPU-s. Runs: root 6 (138 twice), alice 1; 139 (no GPUs) and 144 (running) none.
    assert u["root"]["gpu_hours"] == pytest.approx(67 / 3600) and u["root"]["jobs"] == 6
    assert u["alice"]["gpu_hours"] == pytest.approx(18 / 3600) and u["alice"]["jobs"] == 1
    assert rep.totals["gpu_hours"] == pytest.approx(85 / 3600)
    # queue wait: only 138's second run waited (submitted at its requeue, T+6, started T+132): 126 s over 6 runs
    assert u["root"]["mean_wait_h"] == pytest.approx(126 / 6 / 3600)
    assert u["root"]["max_wait_h"] == pytest.approx(126 / 3600)
    assert u["root"]["share_pct"] == pytest.approx(6700 / 85)


def test_window_clips_allocations():
    rep = report(w=window(T + 2, T + 138))
    # 137 [T, T+4] -> 2 s x 4 = 8; 138 run 0 [T, T+6] -> 4 s x 2 = 8; array [T, T+3] -> 1 s x 3 = 3;
    # 138 run 1 [T+132, T+147] -> 6 s x 2 = 12; 142 [T+11, T+17] -> 6 s x 3 = 18: 49 GPU-s
    assert rep.totals["gpu_hours"] == pytest.approx(49 / 3600)


def test_utilization_is_no_metrics_never_zero():
    rep = report()
    assert any(n.startswith("source: Slurm accounting") and "allocation only" in n for n in rep.notes)
    assert any("no GPU metrics" in n and "not 0 %" in n for n in rep.notes)
    assert rep.columns == ["jobs", "gpu_hours", "share_pct", "mean_wait_h", "max_wait_h"]
    root = by_user(rep)["root"]
    assert root["mean_util_pct"] != root["mean_util_pct"] and root["grade"] == "n/a"  # NaN (unknown), not 0
    assert root["jobs_no_metrics"] == root["jobs"]
    text = render_text(rep, "table")
    assert "0.0 %" not in text and "metric sources" not in text
    data = as_dict(rep)
    assert data["data_source"] == "slurm-accounting (allocation only)" and "mean_util_pct" not in data["totals"]


@pytest.mark.parametrize("kind,sort", [("efficiency", None), ("idle", None), ("top", "waste"), ("top", "used")])
def test_reports_made_of_utilization_are_refused(kind, sort):
    with pytest.raises(InputError, match="needs per-GPU utilization metrics"):
        report(kind=kind, sort=sort)


def test_top_by_gpu_hours_works():
    rep = report(kind="top", sort="gpu-hours")
    assert list(rep.table["user"]) == ["root", "alice"] and not any("grades" in d for d in rep.definitions)


def test_non_admin_asks_sacct_for_own_jobs_and_drops_the_rest():
    """Without PrivateData (the devcluster, many sites) sacct would list every user's jobs: slurmkit asks with
    -u <user> and drops other users' rows anyway. The runner stands in for sacct and returns ALL recorded rows,
    as a sacct ignoring -u would."""
    seen: list[list[str]] = []

    def run(cmd: list[str]) -> str:
        seen.append(cmd)
        return "\n".join(DELIMITER.join(r[f] for f in FIELDS) for r in recorded_rows()) + "\n"

    store, read = open_sacct(window(), Scope("alice"), run=run)
    cmd = seen[0]
    assert cmd[cmd.index("-u") + 1] == "alice" and "-a" not in cmd
    assert read == {"sacct_rows": 9, "runs": 1}
    rep = build("usage", store, window(), ["user"], None, Scope("alice"), source="sacct")
    assert set(by_user(rep)) == {"alice"} and rep.totals["gpu_hours"] == pytest.approx(18 / 3600)
    # an admin's query covers all users
    open_sacct(window(), Scope(), run=run)
    assert "-a" in seen[1] and "-u" not in seen[1]


def test_sacct_window_is_the_report_window():
    seen = []
    open_sacct(window(T, T + 60), Scope(), run=lambda cmd: seen.append(cmd) or "")
    cmd = seen[0]
    # -S/-E (local time, as sacct reads them) select the allocations overlapping the window; the SQL clips them
    local = [time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) for t in (T, T + 60)]
    assert cmd[cmd.index("-S") + 1] == local[0] and cmd[cmd.index("-E") + 1] == local[1]
    assert {"--duplicates", "--allocations", "-P"} <= set(cmd)


def test_node_type_from_the_site_partitions():
    store = memory_store(records(recorded_rows(), Scope()), {"gpu": "devnode"})
    rep = build("usage", store, window(), ["node_type"], None, Scope(), source="sacct")
    assert list(rep.table["node_type"]) == ["devnode"]


def test_cli_refuses_db_with_from_sacct(tmp_path):
    sk = str(Path(sys.executable).parent / "sk")
    out = subprocess.run([sk, "report", "usage", "--from-sacct", "--db", str(tmp_path / "x.db")],
                         capture_output=True, text=True)
    assert out.returncode == 2 and "two different sources" in out.stderr and "Traceback" not in out.stderr
    out = subprocess.run([sk, "report", "efficiency", "--from-sacct"], capture_output=True, text=True)
    assert out.returncode == 2 and "needs per-GPU utilization metrics" in out.stderr


def test_empty_window_says_no_jobs():
    rep = report(w=window(T - 7200, T - 3600))
    assert rep.empty and rep.empty_message().startswith("no GPU jobs between")
    assert json.loads(json.dumps(as_dict(rep), default=str))["empty"] is True
