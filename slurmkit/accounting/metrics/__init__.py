"""GPU metric sources behind one interface: resolve a job's GPUs to an identity once, then sample them.

The per-job sampler (slurmkit/accounting/sampler.py) asks a source for the GPUs Slurm allocated (Slurm's GPU
indices from SLURM_JOB_GPUS), records each GPU's UUID and PCI bus id, and samples utilization, memory, power and
the energy counter every interval. Sources:

* ``nvml``: real NVIDIA GPUs through nvidia-ml-py (metrics/nvml.py). No NVIDIA GPU exists on the machines this
  project is developed on: that path is tested only against a fake ``pynvml`` module implementing the documented
  functions (tests/test_metrics_nvml.py).
* ``simulated``: replays a deterministic trace (metrics/simulated.py) for machines without GPUs (devcluster,
  tests, demos). Its GPUs have UUIDs ``SIMULATED-<node>-<index>`` and every record says source=simulated, so its
  numbers are never mistaken for measurements. ``auto`` never falls back to it.
* ``dcgm``: DCGM job statistics through `dcgmi` (metrics/dcgm.py), a *summary* source: the prolog's sampler
  only starts the host engine's job recording (``summary_only``; its state goes to meta.json as ``recording``)
  and the epilog reads DCGM's per-GPU summary (finish_recording). No host engine exists here: tested against
  real recorded `dcgmi` output and a fake `dcgmi` executable. dcgmi missing or the host engine down: flagged
  record without metrics (SourceUnavailable), never numbers from elsewhere.
* ``slurm`` (gres/gpuutil) is NOT a node source: Slurm records it per step in the accounting database, read after
  the job by `sacct` (slurmkit/accounting/slurm_gpuutil.py: per-job last-poll figures, flagged
  ``last-poll-not-average``, for jobs without any node summary). Choosing it on a node gives the flagged record
  without metrics (SourceUnavailable) with a message that says so.

The sources are registered in slurmkit/record.py (METRIC_SOURCES: name, real or not, implementing module); a
node source's module has ``make(key=, node=, interval_s=, trace=, gpu_map=)``. Only the standard library is
imported here; a source's module is imported by open_source() on demand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol

from slurmkit.record import BY_SOURCE, METRIC_SOURCES

AUTO = "nvml"  # what accounting.metric_source "auto" means
SOURCES = tuple(s.name for s in METRIC_SOURCES if s.on_node)  # the sources a node can sample


class SourceUnavailable(Exception):
    """The source cannot be used on this node (no driver, unknown GPU, not implemented). The message says why."""


@dataclass
class Gpu:
    """One allocated GPU. `index` is Slurm's index on the node (SLURM_JOB_GPUS); identity is uuid / pci_bus_id."""

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    model: str | None = None
    mem_total_mib: int | None = None

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Sample:
    """One reading of one GPU. None where the device does not support the metric."""

    util_pct: float | None
    mem_used_mib: float | None
    power_w: float | None
    energy_mj: int | None  # cumulative energy counter (NVML: millijoules since the driver loaded)

    def as_list(self) -> list:
        return [self.util_pct, self.mem_used_mib, self.power_w, self.energy_mj]


class MetricSource(Protocol):
    """What the sampler needs from a source."""

    name: str

    def open(self, indices: list[int]) -> list[Gpu]:
        """Resolve Slurm GPU indices to GPUs (raises SourceUnavailable)."""
        ...

    def sample(self) -> list[Sample | None]:
        """One reading per opened GPU, in open() order; None for a GPU that could not be read this time."""
        ...

    def close(self) -> None: ...


class SummarySource(Protocol):
    """A source that records by itself (DCGM's host engine): the sampler starts it and waits; the epilog calls
    finish_recording(meta) instead of summarizing readings."""

    name: str
    summary_only: bool

    def open(self, indices: list[int]) -> list[Gpu]: ...

    def recording(self) -> dict:
        """What the epilog needs to find the recording again (stored in meta.json as ``recording``)."""
        ...

    def close(self) -> None: ...


def finish_recording(meta: dict) -> tuple[list[dict], list[str], str | None]:
    """(per-GPU summaries, flags, note) of a summary source's recording (meta.json written by the sampler);
    raises SourceUnavailable when the source cannot give trustworthy numbers."""
    if meta.get("source") == "dcgm":
        from slurmkit.accounting.metrics import dcgm

        return dcgm.finish(meta)
    raise SourceUnavailable(f"source {meta.get('source')!r} keeps no recording")


def parse_gpu_map(text: str | None) -> dict[int, str]:
    """`SK_GPU_MAP` ("0=GPU-8b55...,1=00000000:07:00.0"): Slurm index -> UUID or PCI bus id, set by admins where
    Slurm's GPU order is not the device-minor order (see metrics/nvml.py). Raises ValueError naming the entry."""
    out: dict[int, str] = {}
    for item in filter(None, (x.strip() for x in (text or "").split(","))):
        idx, sep, ident = item.partition("=")
        if not sep or not idx.strip().isdigit() or not ident.strip():
            raise ValueError(f"SK_GPU_MAP entry {item!r}: expected INDEX=UUID or INDEX=PCI_BUS_ID")
        out[int(idx)] = ident.strip()
    return out


def open_source(name: str, *, key: str, node: str, interval_s: float, trace: str | None = None,
                gpu_map: dict[int, str] | None = None) -> MetricSource | SummarySource:
    """The source called `name` (site config accounting.metric_source). `key` identifies the job run
    (cluster/job/run) and seeds the simulated source; raises SourceUnavailable."""
    entry = BY_SOURCE.get(AUTO if name == "auto" else name)
    if entry is None:
        raise SourceUnavailable(f"unknown metric source {name!r} (expected auto, {', '.join(SOURCES)})")
    if entry.module is None:
        raise SourceUnavailable(entry.note or f"{name} is not a node metric source")
    import importlib

    return importlib.import_module(entry.module).make(key=key, node=node, interval_s=interval_s, trace=trace,
                                                      gpu_map=gpu_map)
