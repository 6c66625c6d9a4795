"""The NVML source (nvidia-ml-py's `pynvml`): the real path on NVIDIA nodes.

Which physical GPU is Slurm's index i? Slurm numbers a node's GPUs in the order of their device files
(/dev/nvidiaN, N = the device minor number), with gres.conf `File=` and with AutoDetect=nvml alike; NVML numbers
them in PCI bus order, and the two differ on some machines (Princeton jobstats issue #34 monitored the wrong GPU
that way). So NVML's index is never used: Slurm index i is the GPU with the i-th smallest minor number, or the
UUID / PCI bus id that `SK_GPU_MAP` names for i. Once resolved, every handle is taken by UUID, and the record
carries the UUID and PCI bus id.

Tested only against a fake `pynvml` implementing the documented functions (tests/test_metrics_nvml.py): there is
no NVIDIA GPU where this project is developed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from slurmkit.accounting.metrics import Gpu, Sample, SourceUnavailable

MIB = 1024 * 1024


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlSource:
    name = "nvml"

    def __init__(self, gpu_map: dict[int, str] | None = None, nvml: Any = None) -> None:
        self._map = gpu_map or {}
        self._nvml = nvml
        self._handles: list[Any] = []

    def open(self, indices: list[int]) -> list[Gpu]:
        if self._nvml is None:
            try:
                import pynvml
            except ImportError:
                raise SourceUnavailable("nvidia-ml-py is not installed (pip install 'slurmkit[nvml]')") from None
            self._nvml = pynvml
        nv = self._nvml
        try:
            nv.nvmlInit()
        except nv.NVMLError as exc:
            raise SourceUnavailable(f"NVML cannot start: {exc}") from None
        try:
            by_minor = None
            gpus = []
            for i in indices:
                if i in self._map:
                    ident = self._map[i]
                    uuid_like = ident.upper().startswith(("GPU-", "MIG-"))
                    h = nv.nvmlDeviceGetHandleByUUID(ident) if uuid_like else nv.nvmlDeviceGetHandleByPciBusId(ident)
                else:
                    by_minor = by_minor or self._devices_by_minor()
                    if i >= len(by_minor):
                        raise SourceUnavailable(f"Slurm GPU index {i} but NVML sees {len(by_minor)} GPUs")
                    h = by_minor[i]
                gpus.append(Gpu(index=i, uuid=_text(nv.nvmlDeviceGetUUID(h)),
                                pci_bus_id=_text(nv.nvmlDeviceGetPciInfo(h).busId),
                                model=_text(nv.nvmlDeviceGetName(h)),
                                mem_total_mib=int(nv.nvmlDeviceGetMemoryInfo(h).total // MIB)))
            self._handles = [nv.nvmlDeviceGetHandleByUUID(g.uuid) for g in gpus]
        except nv.NVMLError as exc:
            raise SourceUnavailable(f"NVML: {exc}") from None
        return gpus

    def _devices_by_minor(self) -> list[Any]:
        nv = self._nvml
        handles = [nv.nvmlDeviceGetHandleByIndex(j) for j in range(nv.nvmlDeviceGetCount())]
        return sorted(handles, key=nv.nvmlDeviceGetMinorNumber)

    def _read(self, fn: Any, h: Any) -> Any:
        try:
            return fn(h)
        except self._nvml.NVMLError:  # not supported on this GPU, or lost: a gap, not a zero
            return None

    def sample(self) -> list[Sample | None]:
        nv = self._nvml
        out: list[Sample | None] = []
        for h in self._handles:
            util = self._read(nv.nvmlDeviceGetUtilizationRates, h)
            mem = self._read(nv.nvmlDeviceGetMemoryInfo, h)
            power = self._read(nv.nvmlDeviceGetPowerUsage, h)  # milliwatts
            energy = self._read(nv.nvmlDeviceGetTotalEnergyConsumption, h)  # millijoules
            if util is None and mem is None and power is None and energy is None:
                out.append(None)
                continue
            out.append(Sample(util_pct=None if util is None else float(util.gpu),
                              mem_used_mib=None if mem is None else round(mem.used / MIB, 1),
                              power_w=None if power is None else power / 1000.0,
                              energy_mj=None if energy is None else int(energy)))
        return out

    def close(self) -> None:
        if self._nvml is not None and self._handles:
            with contextlib.suppress(self._nvml.NVMLError):
                self._nvml.nvmlShutdown()


def make(*, key: str, node: str, interval_s: float, trace: str | None = None,
         gpu_map: dict[int, str] | None = None) -> NvmlSource:
    """The source for the registry (slurmkit/record.py METRIC_SOURCES; metrics.open_source calls it)."""
    return NvmlSource(gpu_map=gpu_map)
