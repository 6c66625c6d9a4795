"""Per-GPU summary of a job's readings on one node, and the node record ("gpus", versioned) that carries it.

Definitions (also the store's, see migrations 0001/0002):
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

from slurmkit.report.figures import IDLE_UTIL_PCT

GPUS_VERSION = 1
KIND = "gpus"
GPU_FIELDS = ("index", "uuid", "pci_bus_id", "model", "util_mean", "util_max", "idle_fraction", "mem_max_mib",
              "mem_total_mib", "energy_j", "power_max_w", "samples")


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
        out.append({**{k: gpu.get(k) for k in ("index", "uuid", "pci_bus_id", "model", "mem_total_mib")}, **s})
    return out


def node_record(*, cluster: str, job_id: int, run: int, node: str, source: str, interval_s: float,
                gpus: list[dict], flags: list[str], started: float | None = None, note: str | None = None,
                ended: float | None = None) -> dict:
    """The node summary record delivered by the epilog (spool file or AdminComment segment); `ended` defaults to
    now (the epilog runs as the job ends)."""
    return {"kind": KIND, "version": GPUS_VERSION, "cluster": cluster, "job_id": job_id, "run": run,
            "node": node, "source": source, "interval_s": interval_s, "idle_threshold_pct": IDLE_UTIL_PCT,
            "started": _r(started), "ended": round(time.time() if ended is None else ended, 3),
            "flags": ",".join(flags) or None,
            "note": note, "gpus": [{k: g.get(k) for k in GPU_FIELDS} for g in gpus]}


def empty_gpus(indices: list[int]) -> list[dict]:
    """GPU entries without metrics (no sampler state): the allocation is still recorded, flagged."""
    return [{"index": i, "samples": 0} for i in indices]


def validate(rec: dict) -> str | None:
    """Why a "gpus" record cannot be ingested, or None."""
    if rec.get("version") != GPUS_VERSION:
        return f"unknown gpus record version {rec.get('version')!r} (this slurmkit reads {GPUS_VERSION})"
    for key in ("cluster", "node", "source"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            return f"missing {key}"
    for key in ("job_id", "run"):
        if not isinstance(rec.get(key), int) or isinstance(rec.get(key), bool):
            return f"{key} is not an integer: {rec.get(key)!r}"
    gpus = rec.get("gpus")
    if not isinstance(gpus, list) or not all(isinstance(g, dict) and isinstance(g.get("index"), int) for g in gpus):
        return "gpus is not a list of objects with an integer index"
    return None
