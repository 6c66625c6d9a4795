"""The guide's "Is my job using its GPUs?" page: an example job's `sk report job` output, printed by the real code.

The example is one finished job on the site's default partition that got 4 GPUs (or all of a smaller node) and
used one. Its sacct rows and its AdminComment (written with the node epilog's own encoder) go through the same
functions `sk report job` runs on what sacct returns (slurmkit.report.jobstats), so the page shows exactly what
the command prints, verdict and advice included. The figures are made up for the page and the page says so.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from slurmkit.accounting import admin_comment, gpusummary
from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.report import jobstats
from slurmkit.report.query import Scope
from slurmkit.site.model import Site

JOB_ID = 4242
USER = "alice"
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ELAPSED_S = 2 * 3600 + 30 * 60
UTIL = [87.5, 0.4, 0.0, 1.2]  # one GPU busy, three idle


def example(site: Site) -> dict[str, Any]:
    """The example job: its spec line, the text and JSON `sk report job` prints for it, and its verdict."""
    pname = site.default_partition or next(iter(site.partitions))
    nt = site.node_type_of(pname)
    n = min(len(UTIL), nt.gpu.count)
    gtype, node = nt.gpu.slurm_type, f"{pname}-node01"
    cpus = n * 8
    gpus = [{"index": i, "uuid": f"GPU-example-{i}", "util_mean": UTIL[i], "util_max": min(100.0, UTIL[i] * 1.1),
             "idle_fraction": 0.0 if UTIL[i] >= IDLE_UTIL_PCT else 1.0, "mem_max_mib": 30000 if i == 0 else 3,
             "mem_total_mib": 81920, "energy_j": 2.0e6 if i == 0 else 1.6e5, "power_max_w": 400.0 if i == 0 else 62.0,
             "samples": ELAPSED_S // 10, "model": "NVIDIA A100-SXM4-80GB"} for i in range(n)]
    rec = gpusummary.node_record(cluster=site.cluster, job_id=JOB_ID, run=0, node=node, source="nvml",
                                 interval_s=10.0, gpus=gpus, flags=[], started=START.timestamp(),
                                 ended=START.timestamp() + ELAPSED_S)
    start, end = START.astimezone(UTC).replace(tzinfo=None), datetime.fromtimestamp(
        START.timestamp() + ELAPSED_S, UTC).replace(tzinfo=None)
    alloc = {"JobID": str(JOB_ID), "JobIDRaw": str(JOB_ID), "Cluster": site.cluster, "User": USER,
             "Account": "ml", "Partition": pname, "State": "COMPLETED", "Start": start.isoformat(),
             "End": end.isoformat(), "ElapsedRaw": str(ELAPSED_S), "TimelimitRaw": str(12 * 60),
             "TotalCPU": "05:10:00", "AllocCPUS": str(cpus), "MaxRSS": "", "ReqMem": f"{32 * n}G",
             "AllocTRES": f"billing={cpus},cpu={cpus},gres/gpu:{gtype}={n},gres/gpu={n},mem={32 * n}G,node=1",
             "NodeList": node, "JobName": "train"}
    step = {**alloc, "JobID": f"{JOB_ID}.0", "JobIDRaw": f"{JOB_ID}.0", "MaxRSS": "21G", "AllocTRES": ""}
    runs = jobstats._runs([alloc, step], {JOB_ID: admin_comment.encode(rec)}, Scope(USER))
    text = jobstats.render(runs, lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M %Z"))
    [as_json] = jobstats.as_dict(runs)
    return {"job_id": JOB_ID, "gpus": n, "text": text, "verdict": as_json["verdict"], "advice": as_json["advice"],
            "json_keys": sorted(as_json), "idle_pct": IDLE_UTIL_PCT, "low_cpu_pct": jobstats.LOW_CPU_PCT,
            "low_mem_pct": jobstats.LOW_MEM_PCT, "low_time_pct": jobstats.LOW_TIME_PCT,
            "users_see_gpus": "admin_comment" in site.accounting.transport.split("+"),
            "transport": site.accounting.transport}
