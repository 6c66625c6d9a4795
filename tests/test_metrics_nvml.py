"""The NVML source against a FAKE pynvml: there is no NVIDIA GPU on the machines this project is tested on.

The fake implements only functions nvidia-ml-py documents (nvmlInit, nvmlDeviceGetCount, ...GetHandleByIndex /
ByUUID / ByPciBusId, ...GetMinorNumber, ...GetUUID, ...GetPciInfo().busId, ...GetName, ...GetMemoryInfo(),
...GetUtilizationRates(), ...GetPowerUsage() in mW, ...GetTotalEnergyConsumption() in mJ, NVMLError with
NVMLError_NotSupported), with pynvml >= 11.5 return types (str, not bytes). Its numbers are made up per GPU so a
test can tell which GPU was read.
"""

from __future__ import annotations

import sys
import time
import types
from dataclasses import dataclass

import pytest

from slurmkit.accounting import gpusummary, sampler
from slurmkit.accounting.metrics import SourceUnavailable, open_source, parse_gpu_map
from slurmkit.accounting.metrics.nvml import NvmlSource

MIB = 1024 * 1024


@dataclass
class FakeGpu:
    uuid: str
    bus: str
    minor: int
    util: int
    used_mib: int
    power_mw: int
    energy_mj: int | None  # None: not supported (pre-Volta)


# NVML enumerates in PCI bus order; the device minors (Slurm's order) differ, as in Princeton jobstats #34.
GPUS = [
    FakeGpu("GPU-aaaa0000-0000-0000-0000-000000000000", "00000000:07:00.0", minor=2, util=10, used_mib=1000,
            power_mw=100_000, energy_mj=5_000_000),
    FakeGpu("GPU-bbbb1111-1111-1111-1111-111111111111", "00000000:0F:00.0", minor=0, util=20, used_mib=2000,
            power_mw=200_000, energy_mj=6_000_000),
    FakeGpu("GPU-cccc2222-2222-2222-2222-222222222222", "00000000:47:00.0", minor=3, util=30, used_mib=3000,
            power_mw=300_000, energy_mj=None),
    FakeGpu("GPU-dddd3333-3333-3333-3333-333333333333", "00000000:4E:00.0", minor=1, util=40, used_mib=4000,
            power_mw=400_000, energy_mj=8_000_000),
]


def fake_pynvml(gpus: list[FakeGpu] = GPUS, init_error: bool = False) -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.calls = []  # type: ignore[attr-defined]

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(value)
            self.value = value

        def __str__(self) -> str:
            return {1: "Uninitialized", 3: "Not Supported", 6: "Not Found", 12: "Driver Not Loaded"}.get(
                self.value, "Unknown Error")

    class NVMLError_NotSupported(NVMLError):  # pynvml names it so
        def __init__(self) -> None:
            super().__init__(3)

    state = {"init": False}

    def need_init() -> None:
        if not state["init"]:
            raise NVMLError(1)

    def nvmlInit() -> None:
        if init_error:
            raise NVMLError(12)
        state["init"] = True

    def nvmlShutdown() -> None:
        state["init"] = False

    def handle(g: FakeGpu, how: str) -> tuple[str, FakeGpu]:
        m.calls.append(how)  # type: ignore[attr-defined]
        return ("handle", g)

    def by(pred, how):
        need_init()
        for g in gpus:
            if pred(g):
                return handle(g, how)
        raise NVMLError(6)

    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVMLError_NotSupported = NVMLError_NotSupported  # type: ignore[attr-defined]
    m.nvmlInit = nvmlInit  # type: ignore[attr-defined]
    m.nvmlShutdown = nvmlShutdown  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = lambda: (need_init(), len(gpus))[1]  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = lambda i: by(lambda g: gpus.index(g) == i, "index")  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByUUID = lambda u: by(lambda g: g.uuid == u, "uuid")  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByPciBusId = lambda b: by(lambda g: g.bus == b, "pci")  # type: ignore[attr-defined]
    m.nvmlDeviceGetMinorNumber = lambda h: h[1].minor  # type: ignore[attr-defined]
    m.nvmlDeviceGetUUID = lambda h: h[1].uuid  # type: ignore[attr-defined]
    m.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=h[1].bus)  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = lambda h: "NVIDIA A100-SXM4-80GB"  # type: ignore[attr-defined]
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(  # type: ignore[attr-defined]
        total=81920 * MIB, used=h[1].used_mib * MIB, free=(81920 - h[1].used_mib) * MIB)
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=h[1].util, memory=5)  # type: ignore
    m.nvmlDeviceGetPowerUsage = lambda h: h[1].power_mw  # type: ignore[attr-defined]

    def energy(h):
        if h[1].energy_mj is None:
            raise NVMLError_NotSupported()
        h[1].energy_mj += 1000  # the counter only ever grows
        return h[1].energy_mj

    m.nvmlDeviceGetTotalEnergyConsumption = energy  # type: ignore[attr-defined]
    return m


def fresh() -> list[FakeGpu]:
    return [FakeGpu(**vars(g)) for g in GPUS]


def test_slurm_index_is_the_minor_order_not_the_nvml_index():
    src = NvmlSource(nvml=fake_pynvml(fresh()))
    gpus = src.open([0, 3])
    # Slurm index 0 = smallest minor (0) = NVML index 1; Slurm index 3 = minor 3 = NVML index 2.
    assert [g.uuid for g in gpus] == [GPUS[1].uuid, GPUS[2].uuid]
    assert [g.pci_bus_id for g in gpus] == ["00000000:0F:00.0", "00000000:47:00.0"]
    assert [g.index for g in gpus] == [0, 3]
    assert gpus[0].mem_total_mib == 81920 and gpus[0].model == "NVIDIA A100-SXM4-80GB"
    readings = src.sample()
    assert [r.util_pct for r in readings] == [20.0, 30.0]  # the right GPUs' numbers
    assert [r.mem_used_mib for r in readings] == [2000.0, 3000.0]
    assert [r.power_w for r in readings] == [200.0, 300.0]


def test_handles_are_taken_by_uuid_after_resolving():
    nv = fake_pynvml(fresh())
    src = NvmlSource(nvml=nv)
    src.open([1])
    assert nv.calls[-1] == "uuid"


def test_energy_not_supported_is_a_gap_not_zero():
    src = NvmlSource(nvml=fake_pynvml(fresh()))
    src.open([3, 1])  # minor 3 has no energy counter
    a, b = src.sample()
    assert a.energy_mj is None and a.util_pct == 30.0
    assert b.energy_mj == 8_001_000


def test_gpu_map_by_uuid_and_pci_bus_id():
    gpu_map = parse_gpu_map(f"0={GPUS[3].uuid}, 1=00000000:07:00.0")
    src = NvmlSource(gpu_map=gpu_map, nvml=fake_pynvml(fresh()))
    gpus = src.open([0, 1])
    assert [g.uuid for g in gpus] == [GPUS[3].uuid, GPUS[0].uuid]


@pytest.mark.parametrize("text", ["0", "x=GPU-1", "0=", "=GPU-1"])
def test_gpu_map_errors_name_the_entry(text):
    with pytest.raises(ValueError, match="SK_GPU_MAP entry"):
        parse_gpu_map(text)


def test_unknown_uuid_in_map_is_source_unavailable():
    src = NvmlSource(gpu_map={0: "GPU-ffff"}, nvml=fake_pynvml(fresh()))
    with pytest.raises(SourceUnavailable, match="NVML: Not Found"):
        src.open([0])


def test_more_slurm_gpus_than_nvml_sees():
    with pytest.raises(SourceUnavailable, match="index 7 but NVML sees 4"):
        NvmlSource(nvml=fake_pynvml(fresh())).open([7])


def test_driver_not_loaded_is_source_unavailable():
    with pytest.raises(SourceUnavailable, match="Driver Not Loaded"):
        NvmlSource(nvml=fake_pynvml(init_error=True)).open([0])


def test_missing_nvidia_ml_py_is_source_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(SourceUnavailable, match=r"pip install 'slurmkit\[nvml\]'"):
        open_source("auto", key="c/1/0", node="n", interval_s=1).open([0])


@pytest.mark.parametrize("name", ["slurm", "bogus"])  # dcgm: tests/test_metrics_dcgm.py
def test_unimplemented_sources_refuse_instead_of_inventing(name):
    with pytest.raises(SourceUnavailable):
        open_source(name, key="c/1/0", node="n", interval_s=1)


def test_sampler_process_reads_the_allocated_gpus_through_nvml(tmp_path, monkeypatch, request):
    """The real detached sampler (fork, setsid) with the fake pynvml it inherits: UUIDs and numbers of exactly
    the allocated GPUs end up in the summary."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(fresh()))
    cfg = sampler.NodeConfig.from_env({"SK_STATE_DIR": str(tmp_path), "SK_SAMPLE_INTERVAL": "0.05",
                                       "SK_METRIC_SOURCE": "nvml"})
    job = sampler.JobRun(cluster="c", job_id=7, run=0, node="n1", gpus=[1, 2])
    d = sampler.start_detached(cfg, job)
    request.addfinalizer(lambda: sampler.alive(d) and sampler.stop(d, timeout_s=1))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(sampler.read_state(d)[1]) < 3:
        time.sleep(0.05)
    assert sampler.stop(d) is None
    meta, lines, error = sampler.read_state(d)
    assert error is None and meta["source"] == "nvml"
    summary = gpusummary.summarize(meta, lines)
    # Slurm 1 = minor 1 = GPUS[3]; Slurm 2 = minor 2 = GPUS[0].
    assert [g["uuid"] for g in summary] == [GPUS[3].uuid, GPUS[0].uuid]
    assert [(g["util_mean"], g["util_max"], g["mem_max_mib"], g["power_max_w"]) for g in summary] == [
        (40.0, 40.0, 4000, 400.0), (10.0, 10.0, 1000, 100.0)]
    # The fake counter grows 1 J per reading: the delta between first and last reading.
    assert [g["energy_j"] for g in summary] == [float(len(lines) - 1)] * 2
