"""What the cluster had, from Slurm's own records: slurmdbd's event table, read with `sacctmgr show event`.

A cluster event is the cluster's TRES (GPUs among them) from one registration of slurmctld to the next; a node
event is a time a node was down, drained or failed, with the node's TRES. This is what `sreport cluster
utilization` rolls up into Reported and Down (src/plugins/accounting_storage/mysql/as_mysql_rollup.c, Slurm
25.11: node events in a MAINT state are left to reservations; FUTURE and POWERED_DOWN nodes count as planned down).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slurmkit.slurm.fields import gpu_count
from slurmkit.slurm.sacct import _slurm_time, parse_time, run_sacct

CLUSTER_FIELDS = ("Cluster", "TimeStart", "TimeEnd", "TRES")
NODE_FIELDS = ("Cluster", "NodeName", "TimeStart", "TimeEnd", "State", "TRES")
PLANNED = ("FUTURE", "POWERED_DOWN", "POWER_DOWN")  # sreport's "PLND Down"; MAINT: a maintenance reservation


@dataclass(frozen=True)
class Event:
    """`gpus` GPUs from `start` to `end` (None: still open). kind: "cluster" (the GPUs it had), "down" or
    "planned-down" (a node's GPUs out of service)."""

    cluster: str
    kind: str
    start: int
    end: int | None
    gpus: int
    node: str = ""
    state: str = ""

    def seconds_in(self, lo: int, hi: int) -> int:
        """Seconds of this event inside [lo, hi) (an open event lasts to hi)."""
        end = hi if self.end is None else min(self.end, hi)
        return max(0, end - max(self.start, lo))


def command(kind: str, since: int, until: int, cluster: str | None = None) -> list[str]:
    fields = CLUSTER_FIELDS if kind == "cluster" else NODE_FIELDS
    cmd = ["sacctmgr", "-P", "-n", "show", "event",
           f"Event={'Cluster' if kind == 'cluster' else 'Node'}", f"Start={_slurm_time(since)}",
           f"End={_slurm_time(until)}", f"Format={','.join(fields)}"]
    if cluster:
        cmd.append(f"Clusters={cluster}")
    return cmd


def parse(text: str, kind: str) -> list[Event]:
    """`sacctmgr -P -n show event` rows (epoch times: run_sacct sets SLURM_TIME_FORMAT=%s). A row whose TRES has
    no gres/gpu is 0 GPUs for a cluster (Slurm tracks none) and is left out for a node (it had no GPUs)."""
    fields = CLUSTER_FIELDS if kind == "cluster" else NODE_FIELDS
    out = []
    for line in text.splitlines():
        if not line.strip():
            continue
        # "|": sacctmgr has no --delimiter; no field here can hold one (names, times, states, TRES)
        row = dict(zip(fields, line.split("|"), strict=False))
        start = parse_time(row.get("TimeStart", ""))
        if start is None:
            continue
        gpus = gpu_count(row.get("TRES", ""))  # None: no gres/gpu in it (AccountingStorageTRES lacks it)
        if kind == "cluster":
            out.append(Event(row["Cluster"], "cluster", start, parse_time(row.get("TimeEnd", "")), gpus or 0))
            continue
        state = row.get("State", "").upper()
        if not gpus or "MAINT" in state:
            continue
        planned = any(p in state for p in PLANNED)
        out.append(Event(row["Cluster"], "planned-down" if planned else "down", start,
                         parse_time(row.get("TimeEnd", "")), gpus, row.get("NodeName", ""), state))
    return out


def load(since: int, until: int, cluster: str | None = None,
         run: Callable[[list[str]], str] = run_sacct) -> list[Event]:
    """The cluster and node events that overlap [since, until), for `cluster` (default: sacctmgr's own)."""
    return [*parse(run(command("cluster", since, until, cluster)), "cluster"),
            *parse(run(command("node", since, until, cluster)), "node")]
