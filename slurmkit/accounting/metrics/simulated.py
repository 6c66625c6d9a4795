"""The simulated source: deterministic pretend GPU readings for machines without GPUs (devcluster, tests, demos).

Reading k of a GPU depends only on (job run key, node, Slurm GPU index, k), so a job replays the same numbers
every time and tests can recompute them. The pattern comes from a trace file (site config
accounting.simulated_trace, exported as SK_SIM_TRACE: a CSV with the header `util_pct,mem_used_mib,power_w`,
one row per sample, replayed in a loop from a per-GPU offset) or, without one, from one of four seeded profiles
(busy, idle, bursty, ramp). These numbers are not measurements: GPUs are named `SIMULATED-<node>-<index>`, have no
PCI bus id, and every sample and summary carries source=simulated.
"""

from __future__ import annotations

import csv
import hashlib
import random

from slurmkit.accounting.metrics import Gpu, Sample, SourceUnavailable

MEM_TOTAL_MIB = 81920  # a pretend 80 GB GPU
PROFILES = ("busy", "idle", "bursty", "ramp")
TRACE_COLUMNS = ("util_pct", "mem_used_mib", "power_w")


def gpu_seed(key: str, node: str, index: int) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}/{node}/{index}".encode(), digest_size=8).digest(), "big")


def profile_of(seed: int) -> str:
    return PROFILES[seed % len(PROFILES)]


def profile_reading(seed: int, k: int) -> tuple[float, float, float]:
    """(util %, memory MiB, power W) of reading k for the GPU with this seed."""
    r = random.Random(f"{seed}:{k}").random()
    profile = profile_of(seed)
    if profile == "busy":
        util = 80.0 + 18.0 * r
        mem = MEM_TOTAL_MIB * (0.60 + 0.15 * r)
    elif profile == "idle":
        util = 1.0 if k % 7 == 3 else 0.0
        mem = 420.0
    elif profile == "bursty":
        util = 92.0 + 8.0 * r if (k // 3) % 2 else 3.0 * r
        mem = MEM_TOTAL_MIB * 0.40
    else:  # ramp
        util = min(100.0, 10.0 + 4.0 * k + 3.0 * r)
        mem = MEM_TOTAL_MIB * min(0.9, 0.05 + 0.02 * k)
    return round(util, 1), round(mem, 1), round(60.0 + 3.0 * util + 4.0 * r, 1)


def read_trace(path: str) -> list[tuple[float, float, float]]:
    """Rows of a trace CSV; SourceUnavailable names the file and line of the first bad row."""
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in TRACE_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise SourceUnavailable(f"{path}: line 1: trace header lacks {', '.join(missing)} "
                                        f"(expected {','.join(TRACE_COLUMNS)})")
            rows = []
            for row in reader:
                try:
                    rows.append(tuple(float(row[c]) for c in TRACE_COLUMNS))
                except (TypeError, ValueError):
                    raise SourceUnavailable(f"{path}: line {reader.line_num}: expected three numbers "
                                            f"{','.join(TRACE_COLUMNS)}, got {row}") from None
    except OSError as exc:
        raise SourceUnavailable(f"simulated trace {path}: {exc.strerror}") from None
    if not rows:
        raise SourceUnavailable(f"{path}: the trace has no rows")
    return rows  # type: ignore[return-value]


class SimulatedSource:
    name = "simulated"

    def __init__(self, key: str, node: str, interval_s: float, trace: str | None = None) -> None:
        self.key, self.node, self.interval_s, self.trace = key, node, interval_s, trace
        self._seeds: list[int] = []
        self._energy: list[float] = []
        self._rows: list[tuple[float, float, float]] = []
        self._k = 0

    def open(self, indices: list[int]) -> list[Gpu]:
        if self.trace:
            self._rows = read_trace(self.trace)
        self._seeds = [gpu_seed(self.key, self.node, i) for i in indices]
        self._energy = [float(s % 10**9) for s in self._seeds]  # counters do not start at zero on real GPUs
        return [Gpu(index=i, uuid=f"SIMULATED-{self.node}-{i}", pci_bus_id=None, model="simulated",
                    mem_total_mib=MEM_TOTAL_MIB) for i in indices]

    def reading(self, gpu: int, k: int) -> tuple[float, float, float]:
        seed = self._seeds[gpu]
        if self._rows:
            return self._rows[(seed + k) % len(self._rows)]
        return profile_reading(seed, k)

    def sample(self) -> list[Sample | None]:
        out: list[Sample | None] = []
        for g in range(len(self._seeds)):
            util, mem, power = self.reading(g, self._k)
            self._energy[g] += power * self.interval_s * 1000.0  # mJ over one nominal interval
            out.append(Sample(util_pct=util, mem_used_mib=mem, power_w=power, energy_mj=int(self._energy[g])))
        self._k += 1
        return out

    def close(self) -> None:
        pass


def make(*, key: str, node: str, interval_s: float, trace: str | None = None,
         gpu_map: dict[int, str] | None = None) -> SimulatedSource:
    """The source for the registry (slurmkit/record.py METRIC_SOURCES; metrics.open_source calls it)."""
    return SimulatedSource(key=key, node=node, interval_s=interval_s, trace=trace)
