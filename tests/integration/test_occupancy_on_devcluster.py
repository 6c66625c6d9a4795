"""`sk report occupancy --from-sacct` on the real devcluster: a node drained for a few seconds and a real 2-GPU
job, then the report's capacity, down and allocated GPU-hours checked against what Slurm itself records (the
node's event in `sacctmgr show event`, the GPUs of `scontrol show node`, the job's AllocTRES and times in sacct),
computed here independently, and against `sreport cluster utilization -T gres/gpu` for the same hour. As root
(an admin); alice is refused, since the report is every user's jobs.

sreport reads only slurmdbd's hourly rollups, which cover no hour that has not ended: the sreport test restarts
slurmdbd with its clock an hour ahead (contrib/devcluster/restart-slurmdbd +3600, libfaketime), so that its
start-up rollup covers the current hour, and then with the real clock again.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import datetime, timezone

import pytest

from tests.integration.jobs import ROOT, SK, SPEC, render_and_sbatch, wait

pytestmark = pytest.mark.integration


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _cluster_gpus() -> int:
    out = subprocess.run(["scontrol", "-o", "show", "node"], capture_output=True, text=True, check=True).stdout
    return sum(int(m) for m in re.findall(r"CfgTRES=\S*?gres/gpu=(\d+)", out))


def _sacct_gpu_seconds(since: int, until: int) -> float:
    """GPUs x seconds of every allocation inside [since, until), from sacct's own fields."""
    out = subprocess.run(["sacct", "-a", "-X", "-n", "-P", "-S", _iso(since)[:-1], "-E", _iso(until)[:-1],
                          "--format=Start,End,AllocTRES"], capture_output=True, text=True, check=True,
                         env={"SLURM_TIME_FORMAT": "%s", "PATH": "/usr/local/bin:/usr/bin:/bin"}).stdout
    total = 0.0
    for line in out.splitlines():
        start, end, tres = line.split("|")
        gpus = re.search(r"gres/gpu=(\d+)", tres)
        if not gpus or not start.isdigit():
            continue
        stop = int(end) if end.isdigit() else until
        total += int(gpus.group(1)) * max(0, min(stop, until) - max(int(start), since))
    return total


def _node_gpus(node: str) -> int:
    out = subprocess.run(["scontrol", "-o", "show", "node", node], capture_output=True, text=True,
                         check=True).stdout
    return int(re.search(r"CfgTRES=\S*?gres/gpu=(\d+)", out).group(1))


@pytest.fixture(scope="module")
def drained(tmp_path_factory) -> int:
    """gpu02 drained for 4 s while a real 2-GPU job runs 3 s; the time just before (an epoch), and not before the
    cluster's last registration with slurmdbd (a devcluster just brought up had no GPUs before it)."""
    reg = subprocess.run(["sacctmgr", "-n", "-P", "show", "event", "Event=Cluster", "Format=TimeStart"],
                         capture_output=True, text=True, check=True,
                         env={"SLURM_TIME_FORMAT": "%s", "PATH": "/usr/local/bin:/usr/bin:/bin"}).stdout.split()
    since = max([int(time.time()) - 2, *(int(t) + 1 for t in reg if t.isdigit())])
    time.sleep(max(0.0, since - time.time()))
    job = render_and_sbatch(SPEC.format(name="sk-occupancy", cmd="sleep 3").replace("gpus_per_node: 1",
                                                                                    "gpus_per_node: 2"),
                            tmp_path_factory.mktemp("occupancy"))
    subprocess.run(["scontrol", "update", "nodename=gpu02", "state=drain", "reason=sk occupancy test"], check=True)
    try:
        time.sleep(4)
    finally:
        subprocess.run(["scontrol", "update", "nodename=gpu02", "state=resume"], check=True)
    wait(job)
    time.sleep(1)
    return since


def _occupancy(since: int, until: int) -> dict:
    out = subprocess.run([SK, "report", "occupancy", "--from-sacct", "--since", _iso(since), "--until", _iso(until),
                          "--format", "json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_occupancy_counts_a_real_drain_and_a_real_job(drained: int):
    since, until = drained, int(time.time())
    data = _occupancy(since, until)
    (row,) = data["rows"]
    hours = (data["until_epoch"] - data["since_epoch"]) / 3600
    assert row["capacity_gpu_hours"] == pytest.approx(_cluster_gpus() * hours, rel=1e-6)

    # the drain, as slurmdbd recorded it (its own start and end), x the node's GPUs
    ev = subprocess.run(["sacctmgr", "-n", "-P", "show", "event", "Event=Node", "Nodes=gpu02",
                         f"Start={_iso(since)[:-1]}", "Format=TimeStart,TimeEnd,Reason"], capture_output=True,
                        text=True, check=True, env={"SLURM_TIME_FORMAT": "%s", "PATH": "/usr/local/bin:/usr/bin:/bin"})
    spans = [tuple(int(x) for x in line.split("|")[:2]) for line in ev.stdout.splitlines()
             if line.endswith("|sk occupancy test")]
    assert spans, ev.stdout
    down_s = sum(min(e, until) - max(s, since) for s, e in spans)
    # slurmdbd's own span of the 4 s drain (22.05 was seen recording 2 s of it: its times are the reference)
    assert 0 < down_s <= 8
    assert row["down_gpu_hours"] == pytest.approx(_node_gpus("gpu02") * down_s / 3600, rel=1e-6)
    assert row["available_gpu_hours"] == pytest.approx(row["capacity_gpu_hours"] - row["down_gpu_hours"]
                                                       - row["planned_down_gpu_hours"])

    # allocations: sacct's own times and AllocTRES, this test's 2-GPU job among them
    assert row["gpu_hours"] == pytest.approx(_sacct_gpu_seconds(since, until) / 3600, rel=1e-6, abs=1e-9)
    assert row["gpu_hours"] >= 2 * 3 / 3600
    assert row["occupancy_pct"] == pytest.approx(row["gpu_hours"] / row["available_gpu_hours"] * 100)


def _sreport(start: int, end: int) -> dict[str, int] | None:
    """sreport's GPU figures (TRES seconds) for [start, end), by column name; None before a rollup has them."""
    out = subprocess.run(["sreport", "-P", "-t", "seconds", "cluster", "utilization", f"start={_iso(start)[:-1]}",
                          f"end={_iso(end)[:-1]}", "-T", "gres/gpu"], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/local/bin:/usr/bin:/bin", "TZ": "UTC"})
    lines = out.stdout.splitlines()
    head = next((i for i, line in enumerate(lines) if line.startswith("Cluster|")), None)
    if head is None or head + 1 >= len(lines):
        return None
    row = dict(zip(lines[head].split("|"), lines[head + 1].split("|"), strict=False))
    return {k: int(v) for k, v in row.items() if v.isdigit()}


def test_occupancy_agrees_with_sreport_for_the_hour(drained: int):
    hour = drained // 3600 * 3600
    end = hour + 3600
    deadline = time.monotonic() + 60
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, "jobs still running: sreport's rollup would count them to the hour's end"
        time.sleep(1)
    restart = [str(ROOT / "contrib" / "devcluster" / "restart-slurmdbd")]
    try:
        subprocess.run([*restart, "+3600"], check=True, timeout=180)
        rolled = _sreport(hour, end)  # the script returns once slurmdbd has rolled the hour up
        assert rolled and rolled.get("Reported"), rolled
    finally:
        subprocess.run(restart, check=True, timeout=180)
    before = time.time()
    (row,) = _occupancy(hour, end)["rows"]
    now = (before + time.time()) / 2
    gpus = _cluster_gpus()
    # Allocated and Down: the same jobs and node events, to the second
    assert row["gpu_hours"] * 3600 == pytest.approx(rolled["Allocated"], abs=1)
    assert row["down_gpu_hours"] * 3600 == pytest.approx(rolled["Down"], abs=1)
    assert row["planned_down_gpu_hours"] * 3600 == pytest.approx(rolled["PLND Down"], abs=1)
    # Reported: sreport counts the whole hour; the report stops at now (and says so)
    rest_of_hour = max(0.0, end - now)
    assert rolled["Reported"] - row["capacity_gpu_hours"] * 3600 == pytest.approx(gpus * rest_of_hour, abs=2 * gpus)
    # something to compare: the drain (whole seconds of gpu02's GPUs; 22.05 has recorded 2 s of the 4) and the job
    assert rolled["Down"] > 0 and rolled["Down"] % _node_gpus("gpu02") == 0 and rolled["Allocated"] >= 2 * 3


def test_occupancy_is_refused_to_a_user():
    out = subprocess.run(["runuser", "-u", "alice", "--", SK, "report", "occupancy", "--from-sacct", "--since", "1h"],
                         capture_output=True, text=True, cwd="/tmp")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "all users' jobs" in out.stderr and "Traceback" not in out.stderr
