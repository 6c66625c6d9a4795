"""`sk report occupancy`: Slurm's event records read as sacctmgr prints them, and occupancy against hand-computed
figures (the store scenario of tests/report_store.py: 18 allocated GPU-hours on 2026-11-01, cluster "dev")."""

from __future__ import annotations

import pytest
from report_store import T0, H, scenario
from test_report import sk

from slurmkit.errors import BackendError, InputError
from slurmkit.report.formats import render_text
from slurmkit.report.occupancy import build_occupancy
from slurmkit.report.query import Scope
from slurmkit.report.window import parse_window
from slurmkit.slurm import events
from slurmkit.slurm.fields import gpu_count

# Recorded from the devcluster (Slurm 25.11, sacctmgr -P -n show event ..., SLURM_TIME_FORMAT=%s): the cluster's
# registration (open: "Unknown" end) and gpu02 drained for 4 s. The MAINT, POWERED_DOWN and CPU-only rows are
# written in the same format for the states the devcluster has not been in.
CLUSTER_TEXT = ("devcluster|1796597494|Unknown|billing=128,cpu=128,energy=0,fs/disk=0,gres/gpu:a100=16,"
                "gres/gpu=16,gres/gpumem=0,gres/gpuutil=0,mem=500G,node=2,pages=0,vmem=0\n")
NODE_TEXT = ("devcluster|gpu02|1796608981|1796608985|DRAIN|billing=64,cpu=64,gres/gpu:a100=8,gres/gpu=8,mem=250G\n"
             "devcluster|gpu01|1796608000|1796608100|MAINT|cpu=64,gres/gpu=8,mem=250G\n"
             "devcluster|gpu01|1796600000|Unknown|IDLE+POWERED_DOWN|cpu=64,gres/gpu=8,mem=250G\n"
             "devcluster|cpu01|1796608000|1796608100|DOWN|cpu=64,mem=250G\n\n")


def test_parse_reads_sacctmgr_rows_as_slurm_rolls_them_up():
    (cluster,) = events.parse(CLUSTER_TEXT, "cluster")
    assert (cluster.cluster, cluster.kind, cluster.start, cluster.end, cluster.gpus) == \
        ("devcluster", "cluster", 1796597494, None, 16)
    nodes = events.parse(NODE_TEXT, "node")
    # MAINT is a maintenance reservation's (sreport counts it there), cpu01 has no GPUs: both left out
    assert [(e.node, e.kind, e.start, e.end, e.gpus) for e in nodes] == [
        ("gpu02", "down", 1796608981, 1796608985, 8), ("gpu01", "planned-down", 1796600000, None, 8)]
    assert nodes[0].seconds_in(1796608983, 1796609000) == 2  # clipped to the window
    assert nodes[1].seconds_in(1796600000, 1796600010) == 10  # an open event lasts to the window's end
    assert gpu_count("cpu=4,mem=1G") is None and gpu_count("gres/gpu:h100=4,gres/gpu=4") == 4


def _events(cluster="dev"):
    """16 GPUs all along; gpu02 (8) drained 22:00 .. 01:00 across midnight; gpu01 (8) powered down 1 h; a MAINT
    that must not count."""
    return lambda since, until: [
        events.Event(cluster, "cluster", T0 - 30 * 24 * H, None, 16),
        events.Event(cluster, "down", T0 + 22 * H, T0 + 25 * H, 8, "gpu02", "DRAIN"),
        events.Event(cluster, "planned-down", T0 + 5 * H, T0 + 6 * H, 8, "gpu01", "POWERED_DOWN"),
    ]


def test_occupancy_against_hand_computed_figures(tmp_path):
    store = scenario(tmp_path / "a.db")
    rep = build_occupancy(store, parse_window("2026-11-01", "2026-11-02"), None, Scope(), admin_group="hpcadm",
                          now=T0 + 100 * H, load_events=_events())
    (row,) = rep.table.to_dict("records")
    # capacity 16 x 24; down 8 x 2 h of the drain (22:00 .. 24:00); planned down 8 x 1
    assert row["capacity_gpu_hours"] == pytest.approx(384.0)
    assert row["down_gpu_hours"] == pytest.approx(16.0)
    assert row["planned_down_gpu_hours"] == pytest.approx(8.0)
    assert row["available_gpu_hours"] == pytest.approx(360.0)
    assert row["gpu_hours"] == pytest.approx(18.0)
    assert row["occupancy_pct"] == pytest.approx(5.0)
    assert rep.totals["occupancy_pct"] == pytest.approx(5.0)
    assert "sreport" in " ".join(rep.notes)


def test_occupancy_by_day_splits_a_drain_at_midnight_and_stops_at_now(tmp_path):
    store = scenario(tmp_path / "a.db")
    # now = 2026-11-02 12:00: the second day has 12 h of capacity, 1 h of it drained (00:00 .. 01:00)
    rep = build_occupancy(store, parse_window("2026-11-01", "2026-11-03"), "day", Scope(), admin_group="hpcadm",
                          now=T0 + 36 * H, load_events=_events())
    days = {r["period"]: r for r in rep.table.to_dict("records")}
    assert sorted(days) == ["2026-11-01", "2026-11-02"]
    assert days["2026-11-01"]["down_gpu_hours"] == pytest.approx(16.0)
    assert days["2026-11-02"]["down_gpu_hours"] == pytest.approx(8.0)
    assert days["2026-11-02"]["capacity_gpu_hours"] == pytest.approx(16 * 12)
    assert days["2026-11-02"]["gpu_hours"] == pytest.approx(8.0)  # alice's job 5: 8 GPUs, 01:00 .. 02:00
    assert days["2026-11-02"]["occupancy_pct"] == pytest.approx(8.0 / (16 * 12 - 8) * 100)
    assert rep.totals["capacity_gpu_hours"] == pytest.approx(16 * 36)
    assert any("counted up to now" in n for n in rep.notes)
    text = render_text(rep, "table")
    assert "2026-11-02" in text and "occupancy %" in text


def test_occupancy_is_for_admins_and_needs_slurms_records(tmp_path):
    store = scenario(tmp_path / "a.db")
    w = parse_window("2026-11-01", "2026-11-02")
    with pytest.raises(InputError, match="all users' jobs"):
        build_occupancy(store, w, None, Scope("alice"), admin_group="hpcadm", load_events=_events())
    with pytest.raises(BackendError, match="no record of the cluster's size"):
        build_occupancy(store, w, None, Scope(), admin_group="hpcadm", now=T0 + 100 * H,
                        load_events=lambda since, until: [])
    no_gpus = lambda since, until: [events.Event("dev", "cluster", T0 - H, None, 0)]  # noqa: E731
    with pytest.raises(BackendError, match="TRES lack gres/gpu"):
        build_occupancy(store, w, None, Scope(), admin_group="hpcadm", now=T0 + 100 * H, load_events=no_gpus)


def test_jobs_of_a_cluster_without_events_are_named_not_counted(tmp_path):
    store = scenario(tmp_path / "a.db")
    rep = build_occupancy(store, parse_window("2026-11-01", "2026-11-02"), None, Scope(), admin_group="hpcadm",
                          now=T0 + 100 * H, load_events=_events("other"))
    assert rep.table.to_dict("records")[0]["gpu_hours"] == 0.0
    assert any("left out: jobs of dev" in n for n in rep.notes)


@pytest.mark.parametrize("by", ["user", "partition", "account,week"])
def test_cli_refuses_what_slurm_cannot_answer(by):
    out = sk("report", "occupancy", "--since", "2026-11-01", "--until", "2026-11-02", "--by", by)
    assert out.returncode == 2, out.stderr
    assert "--by" in out.stderr and "cannot group by" in out.stderr and "Traceback" not in out.stderr
