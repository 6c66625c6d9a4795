"""`sk site discover` on real outputs: the published DGX A100 `topo -m` + `lscpu` (tests/data/topo,
tests/data/discover/dgx-a100-40g) and outputs recorded on the devcluster host (tests/data/discover/devcluster)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurmkit.config.units import format_cpulist, parse_cpulist
from slurmkit.errors import InputError
from slurmkit.site import discover as disc
from slurmkit.site.model import NodeType, load_site
from slurmkit.site.topology import parse_topo

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SK = [str(Path(sys.executable).parent / "sk")]


@pytest.fixture
def dgx_dir(tmp_path: Path) -> Path:
    """A --from directory holding the DGX A100 machine's real topo -m and lscpu outputs (same source)."""
    shutil.copy(DATA / "topo" / "dgx-a100-40g-driver525.txt", tmp_path / "topo-m.txt")
    shutil.copy(DATA / "discover" / "dgx-a100-40g" / "lscpu.txt", tmp_path / "lscpu.txt")
    return tmp_path


def run_sk(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SK, *args], capture_output=True, text=True, env=env, timeout=60)


def test_dgx_a100_block_validates_and_matches_the_shipped_site_config(dgx_dir: Path):
    res = run_sk("site", "discover", "--from", str(dgx_dir), "--name", "dgx-a100", "--memory", "1000G",
                 "--gpu-model", "A100-SXM4-40GB")
    assert res.returncode == 0, res.stderr
    block = yaml.safe_load(res.stdout)
    nt = NodeType.model_validate(block["dgx-a100"])
    # this output has 10 RDMA devices (mlx5_8/9 SYS to all): the 10-port DGX A100
    shipped = load_site(ROOT / "site_config" / "dgx-a100-10port.yaml").node_types["dgx-a100"]
    assert [(g.index, g.numa, g.cpus, g.hca) for g in nt.gpus] == \
        [(g.index, g.numa, g.cpus, g.hca) for g in shipped.gpus]
    assert nt.compute_hcas == shipped.compute_hcas
    assert nt.storage_hcas == shipped.storage_hcas == ["mlx5_8", "mlx5_9"]
    assert (nt.sockets, nt.cores_per_socket, nt.threads_per_core, nt.numa_nodes) == (2, 64, 2, 8)
    assert nt.gpu.nvlink == "NV12" and nt.gpu.arch == "ampere"


def test_incomplete_input_lists_everything_missing_at_once(dgx_dir: Path):
    (dgx_dir / "lscpu.txt").unlink()
    with pytest.raises(InputError) as err:
        disc.discover(disc.read_dir(dgx_dir))
    messages = [p.message for p in err.value.problems]
    assert any("sockets" in m for m in messages)
    assert any("memory" in m for m in messages)
    assert any("GPU model" in m for m in messages)


def test_from_dir_without_topo_is_a_usage_error(tmp_path: Path):
    res = run_sk("site", "discover", "--from", str(tmp_path))
    assert res.returncode == 2
    assert "topo-m.txt" in res.stderr and "Traceback" not in res.stderr


def test_without_nvidia_smi_says_what_is_missing_and_exits_1(tmp_path: Path):
    # An empty PATH: no nvidia-smi, whatever machine the test runs on.
    res = run_sk("site", "discover", env={"PATH": str(tmp_path), "HOME": str(tmp_path)})
    assert res.returncode == 1
    assert "nvidia-smi not found" in res.stderr and "--from" in res.stderr
    assert "Traceback" not in res.stderr


def test_json_output_carries_notes_and_node_type(dgx_dir: Path):
    import json

    res = run_sk("site", "discover", "--from", str(dgx_dir), "--memory", "1T", "--gpu-model", "A100-SXM4-40GB",
                 "--fabric", "infiniband", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["node_type"]["gpus"][2] == {"index": 2, "numa": 1, "cpus": "16-31,144-159", "hca": "mlx5_2"}
    assert "query-gpu.csv" in out["missing"]


def test_gres_conf_cores_follow_lscpu_core_ids(dgx_dir: Path):
    # Plain lscpu has no per-CPU core ids, so no gres.conf suggestion is made from it.
    d = disc.discover(disc.read_dir(dgx_dir), memory="1000G", gpu_model="A100-SXM4-40GB")
    assert d.gres_conf == []


def test_devcluster_recorded_lscpu_p_slurmd_c_and_slurmd_g():
    dev = DATA / "discover" / "devcluster"
    layout = disc.parse_lscpu((dev / "lscpu-p.txt").read_text())
    assert (layout.sockets, layout.cores_per_socket, layout.threads_per_core) == (1, 2, 1)
    assert layout.core_of_cpu == {0: 0, 1: 1}
    c = disc.parse_kv_line((dev / "slurmd-C.txt").read_text())
    assert c["RealMemory"] == "24105" and c["CoresPerSocket"] == "2"
    gres = disc.parse_slurmd_g((dev / "slurmd-G.txt").read_text())
    assert [(g["type"], g["count"], g["minors"], g["cores"][0], g["cores"][-1]) for g in gres] == \
        [("a100", 4, [0, 1, 2, 3], 0, 31), ("a100", 4, [4, 5, 6, 7], 32, 63)]


def test_query_gpu_bus_ids_are_trimmed_to_sysfs_form():
    assert disc.short_bus_id("00000000:07:00.0") == "0000:07:00.0"
    assert disc.short_bus_id("0000:07:00.0") == "0000:07:00.0"


def test_infiniband_sysfs_of_a_real_roce_node_makes_fabric_roce(tmp_path: Path):
    # /sys/class/infiniband built from the real `ibstatus` of an H100 RoCE node (tests/data/doctor/README.md)
    from tests.ibstatus import write_infiniband_sysfs

    write_infiniband_sysfs(tmp_path, (DATA / "doctor" / "ibstatus-roce-h100.txt").read_text())
    text = disc._sysfs_infiniband(tmp_path)
    assert text == "mlx5_0 1 ACTIVE Ethernet\nmlx5_1 1 ACTIVE Ethernet\n"
    ports = disc.parse_infiniband(text)
    assert ports == {"mlx5_0": {"1": {"state": "ACTIVE", "link_layer": "Ethernet"}},
                     "mlx5_1": {"1": {"state": "ACTIVE", "link_layer": "Ethernet"}}}
    notes: list[str] = []
    assert disc.fabric_kind(ports, ["mlx5_0", "mlx5_1"], notes) == "roce" and notes == []
    assert disc._sysfs_infiniband(tmp_path / "absent") is None
    # the same ports read straight from the ibstatus text give the same answer
    assert disc.parse_infiniband((DATA / "doctor" / "ibstatus-roce-h100.txt").read_text()) == ports


# ---- every real output in tests/data/topo (sources in tests/data/topo/README.md and SOURCE) -------------------
# Expected values below were read off each file by hand: the compute HCA of GPU i is the NIC in GPU i's row with
# the smallest distance (PIX < PXB < PHB < NODE < SYS), named through the NIC Legend; storage is what is no GPU's
# nearest; NUMA and CPUs are the row's "NUMA Affinity" and "CPU Affinity" cells. CPU layout flags are test inputs
# where the source printed no lscpu; each says where its numbers come from.

TOPO = DATA / "topo"
H100_FLAGS = ("--sockets", "2", "--cores-per-socket", "56", "--threads-per-core", "2", "--numa-nodes", "2")


def from_topo(tmp_path: Path, topo: str, *args: str, files: dict[str, Path] | None = None,
              ) -> subprocess.CompletedProcess:
    d = tmp_path / "node"
    d.mkdir()
    shutil.copy(TOPO / topo, d / "topo-m.txt")
    for name, src in (files or {}).items():
        shutil.copy(src, d / name)
    return run_sk("site", "discover", "--from", str(d), "--name", "n", "--memory", "1000G", "--gpu-model",
                  "H100-SXM5-80GB", *args)


def block(res: subprocess.CompletedProcess) -> NodeType:
    assert res.returncode == 0, res.stderr
    return NodeType.model_validate(yaml.safe_load(res.stdout)["n"])


def hcas(nt: NodeType) -> list[str | None]:
    return [g.hca for g in nt.gpus]


def test_dgx_h200_storage_ports_node_close_to_gpus_are_not_compute(tmp_path: Path):
    # NIC1/NIC2 (mlx5_1/2) and NIC7/NIC8 (mlx5_7/8) are NODE to GPU0-3 / GPU4-7 while every GPU has its own PXB
    # NIC: they are nobody's nearest. Compute = the DGX H100/H200 User Guide's mlx5_0,3,4,5,6,9,10,11. Layout flags:
    # 2 x 56 cores x 2 threads as the affinity ranges 0-55,112-167 / 56-111,168-223 show.
    nt = block(from_topo(tmp_path, "h200-12nic-storage-node-distributedai.txt", *H100_FLAGS))
    assert nt.compute_hcas == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert nt.storage_hcas == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    assert hcas(nt) == nt.compute_hcas  # one rail per GPU, in GPU order
    assert [g.numa for g in nt.gpus] == [0] * 4 + [1] * 4
    assert [g.cpus for g in nt.gpus] == ["0-55,112-167"] * 4 + ["56-111,168-223"] * 4
    shipped = load_site(ROOT / "site_config" / "dgx-h100.yaml").node_types["dgx-h100"]
    assert [(g.numa, g.cpus, g.hca) for g in nt.gpus] == [(g.numa, g.cpus, g.hca) for g in shipped.gpus]
    assert (nt.compute_hcas, nt.storage_hcas) == (shipped.compute_hcas, shipped.storage_hcas)


def test_pix_tie_with_a_storage_card_is_refused_without_port_data(tmp_path: Path):
    # Mooncake#2039: GPU0 is PIX to NIC0, NIC1 and NIC2 (mlx5_0/1/2), GPU4 to mlx5_6/7/8: topo -m cannot say which
    # is the rail. Exit 2 with what to add, not a guess.
    res = from_topo(tmp_path, "mooncake-2039-h100-12nic-cpuset-spaces.txt", *H100_FLAGS)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "GPU0 has mlx5_0, mlx5_1, mlx5_2 all at PIX" in res.stderr
    assert "GPU4 has mlx5_6, mlx5_7, mlx5_8 all at PIX" in res.stderr
    assert "infiniband.txt" in res.stderr and "--storage-hcas" in res.stderr


def test_ibstat_link_layer_and_state_pick_the_rails(tmp_path: Path):
    # The same report's ibstat: mlx5_1/2 Ethernet Down, mlx5_7/8 Ethernet Active, the rest InfiniBand Active.
    # Ethernet ports on this InfiniBand host are storage/front-end, so each GPU keeps one rail: mlx5_0,3,4,5,6,9,10,11.
    # The CPU layout is not in the report; the flags are a DGX H100's (2 x 56 x 2), as a test input.
    res = from_topo(tmp_path, "mooncake-2039-h100-12nic-cpuset-spaces.txt", *H100_FLAGS,
                    files={"infiniband.txt": DATA / "discover" / "mooncake-2039-h100" / "ibstat.txt"})
    nt = block(res)
    assert nt.compute_hcas == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert hcas(nt) == nt.compute_hcas
    assert nt.storage_hcas == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    assert nt.fabric.kind == "infiniband"
    assert "link layer Ethernet on an InfiniBand host" in res.stdout
    assert "no link_layer" not in res.stdout + res.stderr
    # CPU Affinity 4,6,8,10,12 / 1,3,5,7,9,11: 5-6 CPUs where a NUMA node has 112 -> the cpuset warning
    assert [g.cpus for g in nt.gpus] == ["4,6,8,10,12"] * 4 + ["1,3,5,7,9,11"] * 4
    assert "WARNING: GPU0's CPU affinity 4,6,8,10,12 has 5 CPUs" in res.stderr
    assert "restricted cpuset" in res.stderr


def test_a_down_port_is_left_out_of_both_lists(tmp_path: Path):
    # ibstat in the sysfs-dump form, from the same report, with mlx5_9 (GPU5's rail) Down instead of Active.
    text = (DATA / "discover" / "mooncake-2039-h100" / "ibstat.txt").read_text()
    ports = disc.parse_infiniband(text)
    ports["mlx5_9"]["1"]["state"] = "DOWN"
    dump = tmp_path / "infiniband.txt"
    dump.write_text("".join(f"{h} {p} {i['state']} {i['link_layer']}\n" for h, ps in ports.items()
                            for p, i in ps.items()))
    res = from_topo(tmp_path, "mooncake-2039-h100-12nic-cpuset-spaces.txt", *H100_FLAGS,
                    files={"infiniband.txt": dump})
    nt = block(res)
    assert "mlx5_9" not in nt.compute_hcas and "mlx5_9" not in nt.storage_hcas
    assert nt.gpus[5].hca == "mlx5_6"  # GPU5's next nearest: NODE to mlx5_6, mlx5_10, mlx5_11; mlx5_6 first
    assert "mlx5_9: port DOWN, not ACTIVE" in res.stdout


def test_storage_hcas_flag_resolves_the_tie(tmp_path: Path):
    # DeepEP#397 (topo -mp, no NVLink cells): the same PIX tie at GPU0 and GPU4. Its ibv_devinfo lists exactly
    # mlx5_0,3,4,5,6,9,10,11 as InfiniBand; naming the other four with --storage-hcas gives that split.
    res = from_topo(tmp_path, "deepep-397-h100-12nic-topo-mp-cpuset.txt", *H100_FLAGS)
    assert res.returncode == 2 and "GPU0 has mlx5_0, mlx5_1, mlx5_2 all at PIX" in res.stderr
    nt = block(run_sk("site", "discover", "--from", str(tmp_path / "node"), "--name", "n", "--memory", "1T",
                      "--gpu-model", "H100", *H100_FLAGS, "--storage-hcas", "mlx5_1,mlx5_2,mlx5_7,mlx5_8"))
    assert nt.compute_hcas == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert nt.storage_hcas == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    assert nt.gpu.nvlink == "none"  # -mp prints the PCIe paths only
    bad = run_sk("site", "discover", "--from", str(tmp_path / "node"), "--memory", "1T", "--gpu-model", "H100",
                 *H100_FLAGS, "--storage-hcas", "mlx5_99")
    assert bad.returncode == 2 and "--storage-hcas names mlx5_99" in bad.stderr


def test_dgx_a100_12_port_storage_is_mlx5_4_5_10_11(tmp_path: Path):
    # 12 mlx5 columns (old style, no legend): GPU0/1 PXB to mlx5_0/1, GPU2/3 to mlx5_2/3, GPU4/5 to mlx5_6/7,
    # GPU6/7 to mlx5_8/9; mlx5_4/5 and mlx5_10/11 SYS to all. Flags: 2 x 64 x 2, 8 NUMA nodes (NPS4; CPUs to 255).
    nt = block(from_topo(tmp_path, "dgx-a100-12port-gengwg.txt", "--sockets", "2", "--cores-per-socket", "64",
                         "--threads-per-core", "2", "--numa-nodes", "8"))
    assert hcas(nt) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert nt.compute_hcas == hcas(nt)
    assert nt.storage_hcas == ["mlx5_4", "mlx5_5", "mlx5_10", "mlx5_11"]
    assert [g.numa for g in nt.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert nt.gpus[4].cpus == "112-127,240-255"
    # and it is the shipped DGX A100 config (the common 12-port system) GPU by GPU
    shipped = load_site(ROOT / "site_config" / "dgx-a100.yaml").node_types["dgx-a100"]
    assert [(g.numa, g.cpus, g.hca) for g in nt.gpus] == [(g.numa, g.cpus, g.hca) for g in shipped.gpus]
    assert (nt.compute_hcas, nt.storage_hcas) == (shipped.compute_hcas, shipped.storage_hcas)


def test_numa_off_host_with_node_close_storage_pairs(tmp_path: Path):
    # tpgds-aihub0007 (numa=off on the kernel command line in the same log): every GPU NUMA 0, CPUs 0-191.
    # NIC3/NIC4 and NIC9/NIC10 are PIX to each other (dual-port cards) and NODE to every GPU: storage. Compute
    # 0,1,2,5,6,7,8,11 is exactly the NCCL_IB_HCA the same session runs on this host. Flags: 192 CPUs as 2 x 48 x 2,
    # one NUMA node (numa=off).
    nt = block(from_topo(tmp_path, "h100-12nic-numa-off-aihub0007.txt", "--sockets", "2", "--cores-per-socket",
                         "48", "--threads-per-core", "2", "--numa-nodes", "1"))
    assert nt.compute_hcas == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_11"]
    assert hcas(nt) == nt.compute_hcas
    assert nt.storage_hcas == ["mlx5_3", "mlx5_4", "mlx5_9", "mlx5_10"]
    assert {(g.numa, g.cpus) for g in nt.gpus} == {(0, "0-191")}


def test_mangled_copy_is_refused_with_its_line(tmp_path: Path):
    # tpgds-aihub0008's copy lost a tab: "PIXNODE" in GPU5's row (line 8 of the file).
    res = from_topo(tmp_path, "h100-12nic-numa-off-aihub0008-mangled-cell.txt", *H100_FLAGS)
    assert res.returncode == 2 and "topo-m.txt:8:" in res.stderr and "'PIXNODE'" in res.stderr


def test_respaced_header_and_front_end_bond(tmp_path: Path):
    # A copy whose header reads "CPU Affinity   NUMA  GPU NUMA" (re-spaced and shortened) and NIC8 = mlx5_bond_0,
    # NODE to GPU0-3: NUMA 0 x4, 1 x4 from the "NUMA" column; the bond is nobody's nearest and a bond: storage.
    res = from_topo(tmp_path, "h200-bond-respaced-header-weiziyang.txt", "--sockets", "2", "--cores-per-socket",
                    "48", "--threads-per-core", "2", "--numa-nodes", "2")
    nt = block(res)
    assert [g.numa for g in nt.gpus] == [0] * 4 + [1] * 4
    assert hcas(nt) == ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9"]
    assert nt.storage_hcas == ["mlx5_bond_0"]
    # GPU0-3 print 0,2-47,96-143: CPU 1 is missing from a 96-CPU node (2 x 48 x 2 / 2 nodes) -> warned
    assert nt.gpus[0].cpus == "0,2-47,96-143" and "WARNING: GPU0's CPU affinity" in res.stderr
    assert "WARNING: GPU4" not in res.stderr  # 48-95,144-191 is a whole node's share


def test_every_nic_a_bond_keeps_them_as_compute(tmp_path: Path):
    # A800 with RoCE LAG: NIC0-7 are mlx5_bond_0..7, two per GPU pair at PIX (a fair tie: 2 NICs, 2 GPUs).
    nt = block(from_topo(tmp_path, "a800-8x-all-bond-roce-lag.txt", "--sockets", "2", "--cores-per-socket", "31",
                         "--threads-per-core", "2", "--numa-nodes", "2", "--fabric", "roce"))
    assert hcas(nt) == [f"mlx5_bond_{i}" for i in range(8)]
    assert nt.storage_hcas == []
    assert [g.cpus for g in nt.gpus] == ["0-61"] * 4 + ["62-123"] * 4


def test_rocep_device_names_make_the_fabric_roce(tmp_path: Path):
    # 4x A100 with one NIC, NIC0: rocep49s0, SYS to every GPU (the only NIC, so every GPU's nearest). The same
    # report's lscpu lines give 128 CPUs, AMD EPYC 7532 32-core, 2 NUMA nodes -> 2 x 32 x 2.
    res = from_topo(tmp_path, "a100x4-rocep49s0-one-nic.txt", "--sockets", "2", "--cores-per-socket", "32",
                    "--threads-per-core", "2", "--numa-nodes", "2")
    nt = block(res)
    assert nt.fabric.kind == "roce" and nt.compute_hcas == ["rocep49s0"] and hcas(nt) == ["rocep49s0"] * 4
    assert {(g.numa, g.cpus) for g in nt.gpus} == {(1, "32-63,96-127")}
    assert "fabric roce from the RDMA device names" in res.stdout


def test_sys_only_nics_are_shared_and_a_16_nic_tie_needs_a_word(tmp_path: Path):
    # 4x A10, NIC0/NIC1 SYS to all GPUs: both nearest for all; spread 0,1,0,1. NUMA 0, CPUs 0-127 (1 x 64 x 2).
    nt = block(from_topo(tmp_path, "xuesongtap-4x-a10-two-nics-sys.txt", "--sockets", "1", "--cores-per-socket",
                         "64", "--threads-per-core", "2", "--numa-nodes", "1"))
    assert hcas(nt) == ["mlx5_0", "mlx5_1", "mlx5_0", "mlx5_1"] and {g.cpus for g in nt.gpus} == {"0-127"}
    # 8x A100 with four PXB NICs per GPU pair (mlx5_2..17) and mlx5_bond_0 SYS to all: 4 NICs for 2 GPUs is more
    # than topo -m can place; --storage-hcas none says they all are compute.
    # Flags: CPUs 0-103 on one NUMA node as printed -> 2 x 26 x 2, 1 node.
    args = ("--sockets", "2", "--cores-per-socket", "26", "--threads-per-core", "2", "--numa-nodes", "1")
    res = from_topo(_fresh(tmp_path, "a"), "xuesongtap-8x-a100-16nic-bond.txt", *args)
    assert res.returncode == 2 and "GPU0,1 has mlx5_2, mlx5_3, mlx5_4, mlx5_5 all at PXB" in res.stderr
    nt = block(from_topo(_fresh(tmp_path, "b"), "xuesongtap-8x-a100-16nic-bond.txt", *args, "--storage-hcas",
                         "none"))
    assert nt.compute_hcas == [f"mlx5_{i}" for i in range(2, 18)] and nt.storage_hcas == ["mlx5_bond_0"]
    assert hcas(nt) == ["mlx5_2", "mlx5_3", "mlx5_6", "mlx5_7", "mlx5_10", "mlx5_11", "mlx5_14", "mlx5_15"]


def _fresh(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    d.mkdir()
    return d


@pytest.mark.parametrize("topo", ["xuesongtap-2x-1080ti-numa-na.txt", "nccl-19-6x-k80-soc-2016.txt"])
def test_no_numa_source_is_refused_not_written_as_zero(tmp_path: Path, topo: str):
    # NUMA Affinity N/A (2x 1080 Ti) or no NUMA column at all (2016 K80 box), and no lscpu/pci.txt: exit 2.
    res = from_topo(tmp_path, topo, "--sockets", "1", "--cores-per-socket", "6", "--threads-per-core", "2",
                    "--numa-nodes", "1")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "the NUMA node of GPU0" in res.stderr and "nothing is written in its place" in res.stderr
    assert "numa: 0" not in res.stdout


def test_numa_derived_from_affinity_agrees_with_nvidia_smi_on_a_real_pair():
    # The DGX A100 whose topo -m and lscpu were published together: placing each GPU's CPU Affinity on lscpu's
    # NUMA map gives exactly the NUMA Affinity column nvidia-smi printed (3,3,1,1,7,7,5,5).
    t = parse_topo((TOPO / "dgx-a100-40g-driver525.txt").read_text())
    numa_map = disc.parse_lscpu((DATA / "discover" / "dgx-a100-40g" / "lscpu.txt").read_text()).numa_cpus
    derived = [disc.numa_of_cpus(parse_cpulist(g.cpu_affinity or ""), numa_map)[0] for g in t.gpus]
    assert derived == [g.numa_affinity for g in t.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    # an affinity over two nodes names no single node
    numa, why = disc.numa_of_cpus(parse_cpulist("48-79"), numa_map)
    assert numa is None and "spans NUMA nodes 3-4" in why


def test_indented_copy_parses(tmp_path: Path):
    # a blog's 4-space-indented copy (markdown code block), no NICs: NUMA 0 x4 / 1 x4, fabric tcp.
    nt = block(from_topo(tmp_path, "h100-8x-indented-copy.txt", "--sockets", "2", "--cores-per-socket", "48",
                         "--threads-per-core", "2", "--numa-nodes", "2"))
    assert [(g.numa, g.cpus) for g in nt.gpus] == [(0, "0-47,96-143")] * 4 + [(1, "48-95,144-191")] * 4
    assert nt.fabric.kind == "tcp" and nt.compute_hcas == []


def test_help_lists_what_is_needed_and_flags_alone_suffice(tmp_path: Path):
    help_text = run_sk("site", "discover", "--help").stdout
    for flag in ("--sockets", "--cores-per-socket", "--threads-per-core", "--numa-nodes", "--memory",
                 "--gpu-model", "--storage-hcas", "infiniband.txt", "cpuset.txt"):
        assert flag in help_text
    assert "only topo-m.txt is required" not in help_text
    # topo-m.txt plus flags, nothing else: a block (the H200 test above), and partial layout flags are refused
    res = from_topo(tmp_path, "h200-12nic-storage-node-distributedai.txt", "--sockets", "2")
    assert res.returncode == 2 and "go together" in res.stderr


def test_cpuset_read_inside_a_restricted_affinity_is_real_and_warned(tmp_path: Path):
    # This machine, for real: the same reader under `taskset -c 0` sees allowed 0 of the online CPUs.
    if shutil.which("taskset") is None or len(parse_cpulist(Path("/sys/devices/system/cpu/online").read_text()
                                                             .strip())) < 2:
        pytest.skip("needs taskset and two CPUs")
    code = "from slurmkit.site.discover import _cpuset_text; print(_cpuset_text(), end='')"
    text = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout
    allowed, online = disc.parse_cpuset(text)
    assert allowed == [0] and len(online) >= 2
    facts = disc.Facts({"cpuset.txt": text}, "test")
    layout = disc.CpuLayout(1, 2, 1, {})
    notes = disc.cpuset_notes(facts, [{"index": 0, "numa": 0, "cpus": "0-1"}], layout, 1)
    assert notes and "restricted cpuset (allowed CPUs 0 of online" in notes[0]
    # unrestricted (all online CPUs allowed): no warning
    whole = f"allowed {format_cpulist(online)}\nonline {format_cpulist(online)}\n"
    assert disc.cpuset_notes(disc.Facts({"cpuset.txt": whole}, "t"), [{"index": 0, "numa": 0, "cpus": "0-1"}],
                             layout, 1) == []
