"""Per-GPU summary of a job's readings on one node, and the node record ("gpus", versioned) that carries it.

The record's fields are slurmkit/record.py's (GPUS_KIND, GPU_FIELDS). Definitions (also the store's):
* each reading stands for the time since the previous one (the first for one interval), so util_mean and
  idle_fraction are time-weighted; a final reading taken at the job's end weighs only its short gap;
* idle_fraction: share of that time with utilization below IDLE_UTIL_PCT (the reports' idle threshold);
* energy_j: the difference of the GPU's energy counter between the first and last reading; without a usable
  counter (not supported, or reset in between), power integrated over time (trapezoids); energy before the
  first and after the last reading is not counted;
* samples: readings that had at least one metric for the GPU.
"""

from __future__ import annotations

import time
from itertools import pairwise

from slurmkit.record import GPU_FIELDS, GPUS_KIND, GPUS_VERSION, IDLE_UTIL_PCT

# What the sampler's meta.json says about each GPU (slurmkit/accounting/metrics Gpu), copied into its summary.
IDENTITY = ("index", "uuid", "pci_bus_id", "model", "mem_total_mib")


def _weights(times: list[float], interval_s: float) -> list[float]:
    return [interval_s] + [max(0.0, b - a) for a, b in pairwise(times)]


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def summarize_gpu(points: list[tuple[float, list]], interval_s: float,
                  idle_pct: float = IDLE_UTIL_PCT) -> dict:
    """points: (time, [util %, memory MiB, power W, energy mJ]) in time order, any value may be None."""
    util = [(t, v[0]) for t, v in points if v[0] is not None]
    out: dict = {"util_mean": None, "util_max": None, "idle_fraction": None, "samples": len(points)}
    if util:
        w = _weights([t for t, _ in util], interval_s)
        total = sum(w)
        out["util_mean"] = _r(sum(wi * u for wi, (_, u) in zip(w, util, strict=True)) / total)
        out["util_max"] = max(u for _, u in util)
        out["idle_fraction"] = _r(sum(wi for wi, (_, u) in zip(w, util, strict=True) if u < idle_pct) / total, 4)
    mem = [v[1] for _, v in points if v[1] is not None]
    out["mem_max_mib"] = round(max(mem)) if mem else None
    power = [(t, v[2]) for t, v in points if v[2] is not None]
    out["power_max_w"] = max(p for _, p in power) if power else None
    energy = [v[3] for _, v in points if v[3] is not None]
    if len(energy) >= 2 and energy[-1] >= energy[0]:
        out["energy_j"] = _r((energy[-1] - energy[0]) / 1000.0)
    elif len(power) >= 2:
        out["energy_j"] = _r(sum((pa + pb) / 2 * (tb - ta) for (ta, pa), (tb, pb) in pairwise(power)))
    else:
        out["energy_j"] = None
    return out


def summarize(meta: dict, lines: list[dict], idle_pct: float = IDLE_UTIL_PCT) -> list[dict]:
    """One summary per GPU of meta['gpus'], from the sampler's lines ({"t": time, "g": [reading|None, ...]})."""
    out = []
    for i, gpu in enumerate(meta["gpus"]):
        points = []
        for line in lines:
            g = line["g"]
            if i < len(g) and isinstance(g[i], list) and len(g[i]) == 4 and any(v is not None for v in g[i]):
                points.append((float(line["t"]), g[i]))
        s = summarize_gpu(points, float(meta["interval_s"]), idle_pct)
        out.append({**{k: gpu.get(k) for k in IDENTITY}, **s})
    return out


def node_record(*, cluster: str, job_id: int, run: int, node: str, source: str, interval_s: float,
                gpus: list[dict], flags: list[str], started: float | None = None, note: str | None = None,
                ended: float | None = None) -> dict:
    """The node summary record delivered by the epilog (spool file or AdminComment segment); `ended` defaults to
    now (the epilog runs as the job ends)."""
    return {"kind": GPUS_KIND, "version": GPUS_VERSION, "cluster": cluster, "job_id": job_id, "run": run,
            "node": node, "source": source, "interval_s": interval_s, "idle_threshold_pct": IDLE_UTIL_PCT,
            "started": _r(started), "ended": round(time.time() if ended is None else ended, 3),
            "flags": ",".join(flags) or None,
            "note": note, "gpus": [{f.name: g.get(f.name) for f in GPU_FIELDS} for g in gpus]}


def empty_gpus(indices: list[int]) -> list[dict]:
    """GPU entries without metrics (no sampler state): the allocation is still recorded, flagged."""
    return [{"index": i, "samples": 0} for i in indices]
