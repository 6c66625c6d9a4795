"""The admin guide's sample reports: `sk report usage/efficiency/idle/top` as the installed CLI prints them, run
on a small made-up week of this site's partitions and GPUs, one job's `sk report job`, and `sk report occupancy`
on the same week.

The jobs and GPU figures are invented for the page (a dozen job runs, GPU rows with the "simulated" metric
source, so every report prints its simulated-metrics banner); the store is written by the store's own writers
(slurmkit/store/jobs.py, gpus.py, the rollup) and each sample is the real command's output, run in-process on
it at 100 columns. tests/test_docs.py runs the same commands as a user would and compares.

Occupancy also needs what Slurm accounting says the cluster had (`sacctmgr show event`), which no guide build
can ask a real slurmdbd for: its sample reads made-up event rows in sacctmgr's own output format (SAMPLE_NODES
nodes of the partition's node type all week, one of them drained for DRAINED_HOURS) through the real parser
(slurmkit/slurm/events.py) and is rendered by the real report code; tests/test_docs.py checks its figures.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slurmkit.record import validate
from slurmkit.site.model import Site, partition_node_types

SINCE, UNTIL = "2026-11-23", "2026-11-30"  # a Monday to the next one, UTC
DAY0 = 1795392000  # 2026-11-23 00:00 UTC
H = 3600
DAY_END = DAY0 + 7 * 24 * H  # UNTIL
# (user, account, GPUs wanted, start hour after DAY0, hours, per-GPU utilization % or None: no metrics)
JOBS: tuple[tuple[str, str, int, int, int, list[float] | None], ...] = (
    ("alice", "ml", 4, 8, 10, [92.0, 88.0, 90.0, 85.0]),
    ("alice", "ml", 4, 30, 6, [95.0, 0.5, 0.3, 0.2]),
    ("alice", "ml", 2, 60, 14, [78.0, 81.0]),
    ("bob", "physics", 1, 12, 20, [35.0]),
    ("bob", "physics", 2, 50, 8, None),
    ("bob", "physics", 4, 80, 5, [12.0, 0.0, 0.0, 0.0]),
    ("carol", "ml", 8, 40, 12, [64.0, 66.0, 70.0, 61.0, 68.0, 65.0, 63.0, 69.0]),
    ("carol", "physics", 1, 100, 3, [0.0]),
    ("carol", "ml", 4, 120, 9, [97.0, 96.0, 98.0, 95.0]),
)
SAMPLE_NODES = 4  # the partition's nodes in the sample week (the jobs ran on node01-03)
DRAINED_HOURS = 12  # node04 drained from Wednesday 06:00
OCCUPANCY = ("report", "occupancy", "--by", "day")
JOB = ("report", "job", "1002")  # alice's 4-GPU job with 3 idle GPUs
COMMANDS: tuple[tuple[str, ...], ...] = (
    ("report", "usage", "--by", "account"),
    ("report", "efficiency", "--by", "account"),
    ("report", "idle"),
    ("report", "top", "--sort", "waste", "--limit", "5"),
)


def write_store(site: Site, path: Path) -> None:
    """The sample week, in a new SQLite store at `path`, written as ingest writes it."""
    from slurmkit.accounting import gpusummary
    from slurmkit.store import gpus as gpu_rows
    from slurmkit.store import jobs, rollup
    from slurmkit.store.db import open_store

    pname = site.default_partition or next(iter(site.partitions))
    nt = site.node_type_of(pname)
    node_types = partition_node_types(site)
    store = open_store(str(path))
    with store:
        job_rows, gpu_recs = [], []
        for i, (user, account, want, start_h, hours, utils) in enumerate(JOBS):
            job_id, n = 1001 + i, min(want, nt.gpu.count)
            start, end = DAY0 + start_h * H, DAY0 + (start_h + hours) * H
            node = f"{pname}-node{i % 3 + 1:02d}"
            rec = {"version": 1, "kind": "job", "cluster": site.cluster, "job_id": job_id, "run": 0,
                   "job_name": "train", "user_name": user, "account": account, "partition": pname,
                   "qos": "normal", "state": "COMPLETED", "submit_time": start - (i % 4) * 1800,
                   "start_time": start, "end_time": end, "elapsed_s": end - start, "nodes": node, "node_count": 1,
                   "gpus": n, "gpu_types": nt.gpu.slurm_type, "source": "jobcomp"}
            reason = validate(rec)
            if reason:
                raise ValueError(f"sample job {job_id}: {reason}")
            job_rows.append(jobs.row(rec, node_types))
            if utils is None:
                continue
            gpus = [{"index": g, "uuid": f"GPU-sample-{job_id}-{g}", "util_mean": u, "util_max": min(100.0, u * 1.1),
                     "idle_fraction": 1.0 if u < 1 else max(0.0, 1 - u / 50), "mem_max_mib": int(200 + 600 * u),
                     "mem_total_mib": 81920, "energy_j": 1.0e4 * (u + 5) * hours, "power_max_w": 60 + 3.4 * u,
                     "samples": hours * 360, "model": nt.gpu.model} for g, u in enumerate(utils[:n])]
            gpu_recs.append(gpusummary.node_record(cluster=site.cluster, job_id=job_id, run=0, node=node,
                                                   source="simulated", interval_s=10.0, gpus=gpus, flags=[],
                                                   started=start, ended=end))
        with store.transaction() as cur:
            cur.executemany(store.sql(jobs.upsert_sql()), job_rows)
        gpu_rows.upsert(store, gpu_recs)
        rollup.rebuild(store)


def argv(command: tuple[str, ...]) -> list[str]:
    """The command as the guide shows it (the store and freshness options are added to run it)."""
    return [*command, "--since", SINCE, "--until", UNTIL]


def samples(site: Site, command_output: Callable[[list[str]], str]) -> list[dict[str, Any]] | None:
    """[{"command": "sk report ...", "text": what it prints}] for COMMANDS on the sample week; None where the
    reports cannot run here (the `report` extra, pandas, is not installed: the page then says so).
    `command_output(argv)` is what `sk <argv>` prints at 100 columns (slurmkit.cli.docs.command_output)."""
    from importlib.util import find_spec

    if find_spec("pandas") is None:
        return None
    out = []
    with tempfile.TemporaryDirectory(prefix="sk-report-samples-") as tmp:
        db = Path(tmp) / "sample.db"
        write_store(site, db)
        for command in COMMANDS:
            text = command_output([*argv(command), "--db", str(db), "--no-freshness"])
            out.append({"command": "sk " + " ".join(argv(command)), "text": text.rstrip()})
        out.append({"command": "sk " + " ".join(JOB), "text": command_output([*JOB, "--db", str(db)]).rstrip()})
        out.append({"command": "sk " + " ".join(argv(OCCUPANCY)), "text": occupancy_text(site, db)})
    return out


def sacctmgr_events(site: Site) -> dict[str, str]:
    """The sample week as `sacctmgr -P -n show event Event=Cluster|Node` prints it (epoch times, as slurmkit
    asks for them): the cluster's GPUs all week, one node drained for DRAINED_HOURS."""
    pname = site.default_partition or next(iter(site.partitions))
    gpus = site.node_type_of(pname).gpu.count
    drained = DAY0 + (2 * 24 + 6) * H
    return {"cluster": f"{site.cluster}|{DAY0 - 30 * 24 * H}||cpu={64 * SAMPLE_NODES},mem={1024 * SAMPLE_NODES}G,"
                       f"node={SAMPLE_NODES},gres/gpu={gpus * SAMPLE_NODES}\n",
            "node": f"{site.cluster}|{pname}-node{SAMPLE_NODES:02d}|{drained}|{drained + DRAINED_HOURS * H}|DRAIN|"
                    f"cpu=64,mem=1024G,gres/gpu={gpus}\n"}


def occupancy_text(site: Site, db: Path) -> str:
    """`sk report occupancy --by day` on the sample store and sacctmgr_events, as it prints at 100 columns."""
    from slurmkit.report.formats import render_text
    from slurmkit.report.occupancy import build_occupancy
    from slurmkit.report.query import Scope, parse_by
    from slurmkit.report.window import parse_window
    from slurmkit.slurm import events
    from slurmkit.store.db import open_store

    rows = sacctmgr_events(site)

    def load(since: int, until: int) -> list[events.Event]:
        return events.load(since, until, run=lambda cmd: rows["cluster" if "Event=Cluster" in cmd else "node"])

    _, period = parse_by([OCCUPANCY[-1]])
    window = parse_window(SINCE, UNTIL, tz="UTC")
    with open_store(str(db)) as store:
        report = build_occupancy(store, window, period, Scope(), admin_group=site.accounting.admin_group,
                                 now=DAY_END, load_events=load)
    return render_text(report, "table", width=100).rstrip()
