"""`sk site discover` on real outputs: the published DGX A100 `topo -m` + `lscpu` (tests/data/topo,
tests/data/discover/dgx-a100-40g) and outputs recorded on the devcluster host (tests/data/discover/devcluster)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurmkit.errors import InputError
from slurmkit.site import discover as disc
from slurmkit.site.model import NodeType, load_site

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
    shipped = load_site(ROOT / "site_config" / "dgx-a100.yaml").node_types["dgx-a100"]
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
    facts = disc.Facts({"infiniband.txt": text}, "test")
    assert disc._fabric_kind(facts, ["mlx5_0", "mlx5_1"], []) == "roce"
    assert disc._sysfs_infiniband(tmp_path / "absent") is None
