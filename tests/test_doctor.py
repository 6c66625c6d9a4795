"""`sk doctor` checks with injected inputs: real published nvidia-smi / nvcc / ibstatus outputs and real
recorded numactl and /proc outputs (tests/data/doctor/README.md), /sys trees built in tmp_path with the real
layout. The machine running these tests has no GPU; nothing here pretends otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from slurmkit.nccl import select_ifnames
from slurmkit.site import doctor as doc
from slurmkit.site.model import NodeType, load_site
from tests.ibstatus import parse_ibstatus, write_infiniband_sysfs

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "doctor"
SK = str(Path(sys.executable).parent / "sk")


def text(name: str) -> str:
    return (DATA / name).read_text()


def runner(outputs: dict[str, str | None]):
    """A command runner answering from recorded outputs; anything else is 'not found', as on a bare node."""

    def run(cmd: list[str]):
        key = " ".join(cmd)
        if outputs.get(key) is not None:
            return outputs[key], None
        return None, f"{cmd[0]} not found on PATH"

    return run


def inputs(tmp_path: Path, env: dict | None = None, outputs: dict | None = None, **kw) -> doc.Inputs:
    proc, sysd = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True, exist_ok=True)
    sysd.mkdir(exist_ok=True)
    return doc.Inputs(env=env or {}, proc=proc, sys=sysd, run=runner(outputs or {}),
                      python_nccl=kw.get("python_nccl", list))


def dgx() -> NodeType:
    return load_site(ROOT / "site_config" / "dgx-a100.yaml").node_types["dgx-a100"]


def node_type(**changes) -> NodeType:
    nt = yaml.safe_load((ROOT / "site_config" / "devcluster.yaml").read_text())["node_types"]["devnode"]
    for key, value in changes.items():
        nt[key] = value
    return NodeType.model_validate(nt)


def sysfs_from_ibstatus(sys_root: Path, ibstatus: str) -> None:
    """Write /sys/class/infiniband/<hca>/ports/<n>/{state,phys_state,rate,link_layer} as ibstatus read them."""
    write_infiniband_sysfs(sys_root / "class" / "infiniband", ibstatus)


# ---- parsers on real outputs ------------------------------------------------------------------------------

def test_banners_give_driver_and_its_cuda_version():
    assert doc.parse_smi_banner(text("nvidia-smi-h100-driver550.txt")) == ("550.90.07", "12.4")
    assert doc.parse_smi_banner(text("nvidia-smi-quadro-driver535.txt")) == ("535.129.03", "12.2")
    assert doc.parse_nvcc(text("nvcc-version-11.5.txt")) == "11.5"


def test_nvidia_smi_list_with_and_without_mig():
    whole = doc.parse_smi_list(text("nvidia-smi-L-2x-quadro-rtx4000.txt"))
    assert [(g.index, g.name, g.migs) for g in whole] == [(0, "Quadro RTX 4000", []), (1, "Quadro RTX 4000", [])]
    seven = doc.parse_smi_list(text("nvidia-smi-L-a100-mig-7x1g.txt"))
    assert len(seven) == 1 and [p for p, _ in seven[0].migs] == ["1g.10gb"] * 7
    mixed = doc.parse_smi_list(text("nvidia-smi-L-4x-a100-one-mig.txt"))
    assert [len(g.migs) for g in mixed] == [4, 0, 0, 0]
    assert mixed[0].migs[3][1] == "MIG-930574a9-d43a-5d2b-95da-3e68384c8d6b"


def test_ibstatus_and_numactl_and_status_parse():
    ports = parse_ibstatus(text("ibstatus-roce-h100.txt"))  # the fixture builder (tests/ibstatus.py)
    assert ports[("mlx5_1", "1")] == {"state": "4: ACTIVE", "phys_state": "5: LinkUp",
                                     "rate": "100 Gb/sec (4X EDR)", "link_layer": "Ethernet"}
    assert doc.parse_numactl_show(text("numactl-show-membind0-cpu1.txt"))["policy"] == "bind"
    st = doc.parse_status(text("proc-self-status-devcluster-step.txt"))
    assert st["Cpus_allowed_list"] == "0-1" and st["Mems_allowed_list"] == "0"


# ---- driver vs toolkit ------------------------------------------------------------------------------------

@pytest.mark.parametrize("driver,toolkit,smi_cuda,status,phrase", [
    ("550.90.07", "12.4", "12.4", "PASS", "meets CUDA 12.4's minimum 550.54.14"),
    ("550.90.07", "12.6", "12.4", "WARN", "below CUDA 12.6's minimum 560.28.03; runs only under minor-version"),
    ("535.129.03", "12.2", "12.2", "PASS", "supports CUDA up to 12.2"),
    ("535.129.03", "12.2", None, "WARN", "minor-version compatibility (driver >= 525.60.13)"),
    ("535.129.03", "13.0", "12.2", "FAIL", "CUDA 13.0 needs a driver >= 580.65.06"),
    ("580.95.05", "13.0.2", None, "PASS", "meets CUDA 13.0 Update 2's minimum 580.95.05"),
    ("580.82.07", "13.0.2", None, "WARN", "below CUDA 13.0's minimum 580.95.05"),
    ("560.35.03", "12.5.1", None, "PASS", "meets CUDA 12.6's (560.28.03)"),
    ("535.129.03", "11.5", "12.2", "PASS", "meets CUDA 12.0's (525.60.13), which is at least as high"),
    ("470.57.02", "11.5", None, "SKIP", "outside slurmkit's table"),
    ("470.57.02", "12.0", None, "FAIL", "needs a driver >= 525.60.13"),
])
def test_driver_verdict_follows_the_release_notes_table(driver, toolkit, smi_cuda, status, phrase):
    got, reason, _ = doc.driver_verdict(driver, toolkit, smi_cuda)
    assert got == status and phrase in reason, reason


def test_driver_check_on_real_outputs_and_without_a_driver(tmp_path):
    inp = inputs(tmp_path, outputs={"nvidia-smi": text("nvidia-smi-quadro-driver535.txt"),
                                    "nvcc --version": text("nvcc-version-11.5.txt")})
    c = doc.check_driver(inp)
    assert c.status == "PASS" and "driver 535.129.03, CUDA toolkit 11.5" in c.reason and "nvcc --version" in c.reason
    bare = doc.check_driver(inputs(tmp_path / "bare"))
    assert bare.status == "SKIP" and "nvidia-smi not found on PATH" in bare.reason


def test_toolkit_from_cuda_home_version_json(tmp_path):
    cuda = tmp_path / "cuda"
    cuda.mkdir()
    (cuda / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}))
    inp = inputs(tmp_path, env={"CUDA_HOME": str(cuda)},
                 outputs={"nvidia-smi": text("nvidia-smi-h100-driver550.txt")})
    assert doc.toolkit_version(inp) == ("12.4.1", f"{cuda}/version.json")
    assert doc.check_driver(inp).status == "PASS"


# ---- NCCL -------------------------------------------------------------------------------------------------

def nccl_lib(tmp_path: Path, version: str) -> Path:
    """libnccl.so -> libnccl.so.2 -> libnccl.so.X.Y.Z, the layout NCCL's packages install."""
    lib = tmp_path / f"nccl-{version}" / "lib"
    lib.mkdir(parents=True)
    (lib / f"libnccl.so.{version}").write_bytes(b"\x7fELF")
    (lib / "libnccl.so.2").symlink_to(f"libnccl.so.{version}")
    (lib / "libnccl.so").symlink_to("libnccl.so.2")
    return lib


def test_nccl_version_from_the_library_file(tmp_path):
    lib = nccl_lib(tmp_path, "2.21.5")
    check, used = doc.check_nccl(inputs(tmp_path, env={"LD_LIBRARY_PATH": str(lib)}), None)
    assert check.status == "PASS" and "2.21.5" in check.reason and used == (2, 21)


def test_two_nccls_warn_and_old_nccl_on_hopper_warns(tmp_path):
    lib = nccl_lib(tmp_path, "2.18.3")
    inp = inputs(tmp_path, env={"NCCL_HOME": str(lib.parent)},
                 python_nccl=lambda: [("2.21.5", "Python package nvidia-nccl-cu12")])
    check, used = doc.check_nccl(inp, None)
    assert check.status == "WARN" and "several NCCL versions" in check.reason and used == (2, 21)
    hopper = dgx().model_copy(update={"gpu": dgx().gpu.model_copy(update={"arch": "hopper", "nvlink": "NV18"})})
    old = nccl_lib(tmp_path / "old", "2.16.2")
    check, _ = doc.check_nccl(inputs(tmp_path, env={"LD_LIBRARY_PATH": str(old)}), hopper)
    assert check.status == "WARN" and "NVLS" in check.reason


def test_no_nccl_is_a_skip_with_where_it_looked(tmp_path):
    check, used = doc.check_nccl(inputs(tmp_path), None)
    assert check.status == "SKIP" and used is None and "LD_LIBRARY_PATH" in check.reason


# ---- GPUs allocated vs visible ------------------------------------------------------------------------------

def gpus(tmp_path, env, smi=None):
    inp = inputs(tmp_path, env={"SLURM_JOB_ID": "7", **env},
                 outputs={"nvidia-smi -L": text(smi) if smi else None})
    return doc.check_gpus(doc.devices(inp))


def test_allocated_matches_visible_and_nvidia_smi(tmp_path):
    c = gpus(tmp_path, {"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"}, "nvidia-smi-L-2x-quadro-rtx4000.txt")
    assert c.status == "PASS" and "nvidia-smi sees 2" in c.reason


def test_unconfined_devices_warn_and_missing_cvd_fails(tmp_path):
    c = gpus(tmp_path, {"SLURM_JOB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "1"}, "nvidia-smi-L-2x-quadro-rtx4000.txt")
    assert c.status == "WARN" and "not confined to the job" in c.reason



def test_step_without_cuda_visible_devices_depends_on_device_confinement(tmp_path):
    # What Slurm 22.05 gives an `srun --gpu-bind=none` step (seen on the devcluster): SLURM_JOB_GPUS only.
    step = {"SLURM_STEP_ID": "0", "SLURM_JOB_GPUS": "0,1"}
    c = gpus(tmp_path, step)
    assert c.status == "WARN" and "srun --gpu-bind=none steps get none on Slurm 22.05" in c.reason
    assert c.fix.startswith("export CUDA_VISIBLE_DEVICES=0,1")
    c = gpus(tmp_path, step, "nvidia-smi-L-2x-quadro-rtx4000.txt")  # the cgroup shows only the job's 2
    assert c.status == "PASS" and "confines this step" in c.reason
    c = gpus(tmp_path, {**step, "SLURM_JOB_GPUS": "1"}, "nvidia-smi-L-2x-quadro-rtx4000.txt")
    assert c.status == "FAIL" and "nvidia-smi sees 2 GPUs: CUDA device i is the node's GPU i" in c.reason


def test_more_visible_than_allocated_fails_fewer_warns(tmp_path):
    c = gpus(tmp_path, {"SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert c.status == "FAIL" and "SLURM_STEP_GPUS=1" in c.reason
    c = gpus(tmp_path, {"SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "1"})
    assert c.status == "WARN" and "NCCL's CUDA IPC" in c.reason
    assert gpus(tmp_path, {"SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}).status == "FAIL"


def test_mig_job_sees_its_one_mig_device(tmp_path):
    c = gpus(tmp_path, {"SLURM_JOB_GPUS": "0", "CUDA_VISIBLE_DEVICES": "MIG-3fff3a97-95a9-5046-9053-4c0da3d1add7"},
             "nvidia-smi-L-in-job-mig-1g.txt")
    assert c.status == "PASS" and c.details["nvidia_smi"]["mig_devices"] == \
        ["MIG-3fff3a97-95a9-5046-9053-4c0da3d1add7"]
    # the 4x A100 node with GPU 0 in MIG mode offers 4 MIG devices + 3 whole GPUs = 7 devices; a job given 2
    c = gpus(tmp_path, {"SLURM_JOB_GPUS": "1,2", "CUDA_VISIBLE_DEVICES": "1,2"}, "nvidia-smi-L-4x-a100-one-mig.txt")
    assert c.status == "WARN" and "nvidia-smi sees 7" in c.reason


def test_outside_a_job_without_nvidia_smi_is_a_skip(tmp_path):
    c = doc.check_gpus(doc.devices(inputs(tmp_path)))
    assert c.status == "SKIP" and "not inside a Slurm job" in c.reason


# ---- CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER ----------------------------------------------------------------

def cuda_env(tmp_path, env, smi=None):
    inp = inputs(tmp_path, env=env, outputs={"nvidia-smi -L": text(smi) if smi else None})
    return doc.check_cuda_env(inp, doc.devices(inp))


def test_device_order_unset_warns_pci_bus_id_passes(tmp_path):
    c = cuda_env(tmp_path, {"SLURM_JOB_ID": "1", "SLURM_JOB_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert c.status == "WARN" and "CUDA_DEVICE_ORDER is unset" in c.reason and "PCI_BUS_ID" in c.fix
    c = cuda_env(tmp_path, {"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert c.status == "PASS"
    assert cuda_env(tmp_path, {"CUDA_DEVICE_ORDER": "pci"}).status == "FAIL"


def test_malformed_duplicate_and_out_of_range_devices_fail(tmp_path):
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    c = cuda_env(tmp_path, {**env, "CUDA_VISIBLE_DEVICES": "0,gpu1"})
    assert c.status == "FAIL" and "'gpu1' is not a device index or UUID" in c.reason
    assert "names 1 twice" in cuda_env(tmp_path, {**env, "CUDA_VISIBLE_DEVICES": "1,1"}).reason
    c = cuda_env(tmp_path, {**env, "CUDA_VISIBLE_DEVICES": "0,3"}, "nvidia-smi-L-2x-quadro-rtx4000.txt")
    assert c.status == "FAIL" and "device 3, nvidia-smi lists only 2" in c.reason
    c = cuda_env(tmp_path, {**env, "CUDA_VISIBLE_DEVICES": "0,GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43"})
    assert c.status == "WARN" and "mixes indices and UUIDs" in c.reason


# ---- HCAs ---------------------------------------------------------------------------------------------------

ROCE = {"kind": "roce", "ib_gid_index": 3}


def test_hcas_from_real_roce_ports(tmp_path):
    inp = inputs(tmp_path)
    sysfs_from_ibstatus(inp.sys, text("ibstatus-roce-h100.txt"))
    nt = node_type(fabric=ROCE, compute_hcas=["mlx5_0", "mlx5_1"], storage_hcas=[],
                   gpus=[{"index": i, "numa": i // 4, "cpus": "0-31" if i < 4 else "32-63",
                          "hca": "mlx5_0" if i < 4 else "mlx5_1"} for i in range(8)])
    c = doc.check_hcas(inp, nt)
    assert c.status == "PASS" and "mlx5_0 ACTIVE" in c.reason
    ib = nt.model_copy(update={"fabric": nt.fabric.model_copy(update={"kind": "infiniband"})})
    c = doc.check_hcas(inp, ib)
    assert c.status == "WARN" and "link layer is Ethernet, the site says fabric infiniband" in c.reason
    (inp.sys / "class/infiniband/mlx5_1/ports/1/state").write_text("1: DOWN\n")  # a port gone down
    c = doc.check_hcas(inp, nt)
    assert c.status == "FAIL" and "compute HCA mlx5_1 port 1 is DOWN" in c.reason


def test_missing_compute_hca_fails_and_no_rdma_depends_on_fabric(tmp_path):
    inp = inputs(tmp_path)
    sysfs_from_ibstatus(inp.sys, text("ibstatus-roce-h100.txt"))
    c = doc.check_hcas(inp, node_type(fabric=ROCE))  # devnode names mlx5_0..3 and storage mlx5_4
    assert c.status == "FAIL" and "compute HCA(s) mlx5_2, mlx5_3 not present (have: mlx5_0, mlx5_1)" in c.reason
    bare = inputs(tmp_path / "bare")
    assert doc.check_hcas(bare, node_type()).status == "FAIL"
    tcp = node_type(fabric={"kind": "tcp"}, compute_hcas=[], storage_hcas=[],
                    gpus=[{"index": i, "numa": 0, "cpus": "0-31"} for i in range(8)])
    assert doc.check_hcas(bare, tcp).status == "PASS"
    c = doc.check_hcas(inp, tcp)  # RDMA devices present, but the node type uses none
    assert c.status == "PASS" and "uses no HCAs; present: mlx5_0, mlx5_1" in c.reason
    assert doc.check_hcas(bare, None).status == "SKIP"


# ---- NCCL environment ---------------------------------------------------------------------------------------

def test_nccl_env_lint_and_what_the_node_does_not_have(tmp_path):
    inp = inputs(tmp_path, env={"NCCL_TOPO": "ring"})
    c = doc.check_nccl_env(inp, None, None)
    assert c.status == "FAIL" and "there is no NCCL_TOPO" in c.reason
    inp = inputs(tmp_path / "b", env={"NCCL_IB_HCA": "=mlx5_0,mlx5_9", "NCCL_SOCKET_IFNAME": "ib"})
    sysfs_from_ibstatus(inp.sys, text("ibstatus-roce-h100.txt"))
    for name in ("lo", "eth0"):
        (inp.sys / "class" / "net" / name).mkdir(parents=True)
    c = doc.check_nccl_env(inp, None, (2, 21))
    assert c.status == "FAIL"
    assert "NCCL_IB_HCA names mlx5_9, which this node does not have (has: mlx5_0, mlx5_1)" in c.reason
    assert "NCCL_SOCKET_IFNAME=ib: no interface matches it (have: eth0, lo)" in c.reason
    ok = inputs(tmp_path / "c", env={"NCCL_DEBUG": "WARN"})
    assert doc.check_nccl_env(ok, None, None).status == "PASS"


# ---- binding --------------------------------------------------------------------------------------------------

def binding(tmp_path, env, cpus, mems="0-7", online="0-255", numactl=None, nt=None):
    inp = inputs(tmp_path, env=env, outputs={"numactl --show": numactl})
    (inp.proc / "self" / "status").write_text(f"Name:\tpython\nCpus_allowed_list:\t{cpus}\n"
                                              f"Mems_allowed_list:\t{mems}\n")
    cpu = inp.sys / "devices" / "system" / "cpu"
    cpu.mkdir(parents=True, exist_ok=True)
    (cpu / "online").write_text(online + "\n")
    return doc.check_binding(inp, nt or dgx(), "dgx-a100")


JOB = {"SLURM_JOB_ID": "9", "SLURM_JOB_GPUS": "4,5", "SLURM_LOCALID": "1"}  # local rank 1 -> GPU 5 (NUMA 7)


def test_rank_bound_to_its_gpus_cpus_passes(tmp_path):
    c = binding(tmp_path, JOB, "112-127,240-255")
    assert c.status == "PASS" and c.details["gpu"] == 5 and c.details["expected_cpus"] == "112-127,240-255"
    assert "local rank 1 -> GPU 5 (NUMA 7" in c.reason


def test_unbound_rank_warns_and_wrong_socket_fails(tmp_path):
    c = binding(tmp_path, JOB, "0-255")
    assert c.status == "WARN" and "224 of them are not the GPU's" in c.reason
    assert "numactl --physcpubind=112-127,240-255" in c.fix
    c = binding(tmp_path, JOB, "0-15,128-143")
    assert c.status == "FAIL" and "none of them local to the GPU" in c.reason


def test_bind_step_choice_is_what_the_rank_must_have(tmp_path):
    env = {**JOB, "SK_BIND_CPUS": "112-127,240-255"}
    assert binding(tmp_path, env, "112-127,240-255").status == "PASS"
    c = binding(tmp_path, env, "112-113")
    assert c.status == "FAIL" and "something re-bound the rank" in c.reason


def test_torchrun_local_rank_wins_over_slurm_localid(tmp_path):
    c = binding(tmp_path, {**JOB, "LOCAL_RANK": "0"}, "112-127,240-255")
    assert c.details["gpu"] == 4


def test_memory_bound_to_another_numa_node_fails(tmp_path):
    # the real `numactl --membind=0 ...` output; GPU 5 is on NUMA node 7
    c = binding(tmp_path, JOB, "112-127,240-255", numactl=text("numactl-show-membind0-cpu1.txt"))
    assert c.status == "FAIL" and "memory policy bind to node 0, not the GPU's NUMA node 7" in c.reason
    c = binding(tmp_path, JOB, "112-127,240-255", numactl=text("numactl-show-default.txt"))
    assert c.status == "PASS" and "memory policy default" in c.reason


def test_node_type_that_does_not_describe_the_machine_fails(tmp_path):
    c = binding(tmp_path, JOB, "0-1", online="0-1")
    assert c.status == "FAIL" and "lists CPUs this machine does not have (online: 0-1)" in c.reason


def test_binding_without_gpus_or_node_type_skips_but_reports_actual(tmp_path):
    c = binding(tmp_path, {"SLURM_JOB_ID": "9"}, "0-3")
    assert c.status == "SKIP" and "this rank runs on CPUs 0-3" in c.reason


# ---- site context, exit status, CLI ---------------------------------------------------------------------------

def test_site_context_from_the_jobs_partition():
    site = load_site(ROOT / "site_config" / "devcluster.yaml")
    ctx = doc.site_context(site, None, {"SLURM_JOB_PARTITION": "gpu"})
    assert ctx.node_type_name == "devnode" and ctx.check.status == "PASS"
    ctx = doc.site_context(site, None, {"SLURM_JOB_PARTITION": "debug"})
    assert ctx.node_type is None and ctx.check.status == "FAIL" and "no partition 'debug'" in ctx.check.reason
    assert doc.site_context(None, "x.yaml:3: error: bad", {}).check.status == "FAIL"
    assert doc.site_context(None, "error: no site configuration found; ...", {}).check.status == "SKIP"


def test_exit_status_is_the_worst_check():
    mk = [doc.Check("a", s, "") for s in ("PASS", "SKIP")]
    assert doc.exit_status(mk) == 0
    assert doc.exit_status([*mk, doc.Check("b", "WARN", "")]) == 1
    assert doc.exit_status([*mk, doc.Check("b", "WARN", ""), doc.Check("c", "FAIL", "")]) == 2


def test_cli_json_on_this_machine_reports_every_check_and_exits_with_the_worst(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "CUDA_", "NCCL_"))}
    env["PATH"] = "/usr/bin:/bin"  # no nvidia-smi here, whatever the test machine has
    res = subprocess.run([SK, "doctor", "--json", "--site", str(ROOT / "site_config" / "devcluster.yaml")],
                         capture_output=True, text=True, env=env, timeout=60)
    out = json.loads(res.stdout)
    names = [c["name"] for c in out["checks"]]
    assert names == ["site", "driver", "nccl", "gpus", "cuda_env", "hcas", "ifname", "nccl_env", "binding"]
    assert res.returncode == out["exit_status"] == doc.exit_status([doc.Check(**c) for c in out["checks"]])
    by = {c["name"]: c for c in out["checks"]}
    assert by["driver"]["status"] == "SKIP" and "nvidia-smi not found" in by["driver"]["reason"]
    assert by["binding"]["details"]["cpus_allowed"]  # the real /proc/self/status was read
    assert by["ifname"]["status"] == "PASS" and "selects lo (up)" in by["ifname"]["reason"]  # devcluster: lo


def test_cli_help_documents_exit_statuses():
    res = subprocess.run([SK, "doctor", "--help"], capture_output=True, text=True, timeout=60)
    want = "Exit status:\n    0  every check PASS or SKIP\n    1  at least one WARN, no FAIL\n    2  at least one FAIL"
    assert want in res.stdout


# ---- socket_ifname vs this machine's real interfaces ---------------------------------------------------------

REAL = doc.Inputs(env={}, proc=Path("/proc"), sys=Path("/sys"))


def real_ifaces() -> dict[str, bool]:
    got = doc.net_interfaces(REAL)
    if not got:
        pytest.skip("no /sys/class/net here")
    return got


def fabric(ifname: str | None) -> NodeType:
    return node_type(fabric={"kind": "tcp", "socket_ifname": ifname})


def test_socket_ifname_on_this_machines_real_interfaces():
    ifaces = real_ifaces()
    assert ifaces.get("lo") is True  # operstate "unknown", IFF_UP set: loopback counts as up
    c = doc.check_ifname(REAL, fabric("lo"))
    assert c.status == "PASS" and "selects lo (up)" in c.reason
    # ib0 is what the DGX config used to say; no such interface here (nor on DGX OS 5+, which names IPoIB ibp*)
    c = doc.check_ifname(REAL, fabric("ib0"))
    assert c.status == "FAIL" and "selects no interface here" in c.reason and "ibp" in c.fix
    up_eth = sorted(n for n, up in ifaces.items() if n.startswith("eth") and up)
    if up_eth:  # a prefix, as NCCL takes it: "eth" selects eth0
        c = doc.check_ifname(REAL, fabric("eth"))
        assert c.status == "PASS" and up_eth[0] in c.reason
    down = sorted(n for n, up in ifaces.items() if not up)
    if down:  # e.g. this machine's ifb0/ifb1, which are down: selecting only them fails
        c = doc.check_ifname(REAL, fabric("=" + down[0]))
        assert c.status == "FAIL" and "none of them up" in c.reason
    # exclusions: ^lo selects everything else; the ^ covers the whole list
    assert select_ifnames("^lo,eth", ["lo", "eth0", "ibp12s0"]) == ["ibp12s0"]
    assert select_ifnames("=eth", ["eth0"]) == [] and select_ifnames("eth", ["eth0"]) == ["eth0"]
    assert doc.check_ifname(REAL, fabric(None)).status == "PASS"
    assert doc.check_ifname(REAL, None).status == "SKIP"


def test_ip_link_fallback_agrees_with_sysfs_on_this_machine(tmp_path):
    import shutil as sh

    if sh.which("ip") is None:
        pytest.skip("no ip(8) here")
    ifaces = real_ifaces()
    real_ip = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert doc.parse_ip_link(real_ip) == ifaces
    # with no /sys/class/net, the check reads `ip -o link` instead
    inp = inputs(tmp_path, outputs={"ip -o link": real_ip})
    assert doc.net_interfaces(inp) == ifaces
    assert doc.check_ifname(inp, fabric("lo")).status == "PASS"
