"""`sk site check` against the live devcluster: the shipped config passes clean; a deliberately wrong copy
gets one specific finding per mistake; a Slurm that cannot be asked exits 3."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import as_user, running_slurm_version
from tests.integration.jobs import DEVSITE, SK

pytestmark = pytest.mark.integration


def sk_check(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SK, "site", "check", *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture
def live_site() -> Iterator[Path]:
    """The shipped devcluster config with `slurm_version` set to the running Slurm's series: the devcluster runs
    22.05 or 25.11 (contrib/devcluster/up --slurm), the shipped file names CI's default, 25.11."""
    major, minor, _ = running_slurm_version()
    d = yaml.safe_load(Path(DEVSITE).read_text())
    d["slurm_version"] = f"{major:02d}.{minor:02d}"
    where = Path(tempfile.mkdtemp(prefix="sk-live-site-", dir="/tmp"))  # readable by alice, unlike tmp_path
    where.chmod(0o755)
    path = where / "devcluster.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    path.chmod(0o644)
    yield path
    shutil.rmtree(where, ignore_errors=True)


def test_shipped_devcluster_config_passes_clean(devcluster, live_site):
    res = sk_check("--site", str(live_site))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "result: 0 error(s), 0 warning(s)" in res.stdout
    assert "gres.conf via slurmd -G on gpu01" in res.stdout  # Cores= really compared
    out = json.loads(sk_check("--site", str(live_site), "--json").stdout)
    assert out["findings"] == [] and out["checked"]["nodes"] == ["gpu01", "gpu02"]
    major, minor, _ = running_slurm_version()
    assert out["cluster"] == "devcluster" and out["slurm_version"].startswith(f"{major:02d}.{minor:02d}")


def test_shipped_devcluster_config_names_the_ci_default_version(devcluster):
    """Its only possible finding is the version when the devcluster runs the other release (22.05)."""
    out = json.loads(sk_check("--site", DEVSITE, "--json").stdout)
    if running_slurm_version()[:2] == (25, 11):
        assert out["findings"] == []
    else:
        (finding,) = out["findings"]
        assert finding["check"] == "cluster.slurm_version" and finding["severity"] == "error"


@pytest.fixture
def wrong_site(tmp_path: Path) -> Path:
    """The devcluster config with four mistakes: GPU count, partition name, cores per socket, gres type."""
    d = yaml.safe_load(Path(DEVSITE).read_text())
    nt = d["node_types"]["devnode"]
    nt["gpu"].update(count=4, slurm_type="h100")
    nt["gpus"] = nt["gpus"][:4]
    nt["cores_per_socket"] = 16
    for g in nt["gpus"]:
        g["cpus"] = "0-15"
    d["partitions"]["gpu-a100"] = d["partitions"].pop("gpu")
    d["default_partition"] = "gpu-a100"
    path = tmp_path / "wrong-site.yaml"
    path.write_text(yaml.safe_dump(d, sort_keys=False))
    return path


def test_wrong_config_lists_each_mistake_with_its_fix(devcluster, wrong_site):
    res = sk_check("--site", str(wrong_site), "--json")
    assert res.returncode == 1, res.stderr
    out = json.loads(res.stdout)
    by = {f["check"]: f for f in out["findings"]}
    part = by["partition.exists"]
    assert part["severity"] == "error" and part["key"] == "partitions.gpu-a100"
    assert "partition 'gpu-a100' does not exist in Slurm (Slurm has: gpu)" in part["message"]
    assert part["fix"].startswith("rename partitions.gpu-a100 to one of Slurm's partitions (gpu), or add "
                                  "PartitionName=gpu-a100 to slurm.conf (/run/slurmkit-devcluster/etc/slurm.conf)")
    # The partition is unknown, so its nodes are not compared under that name; Slurm's own partition is
    # reported as unlisted.
    assert by["partition.unlisted"]["slurm_value"] == "gpu"
    # Node checks need a partition that exists: fix the name only and check again.
    d = yaml.safe_load(wrong_site.read_text())
    d["partitions"]["gpu"] = d["partitions"].pop("gpu-a100")
    d["default_partition"] = "gpu"
    wrong_site.write_text(yaml.safe_dump(d, sort_keys=False))
    res = sk_check("--site", str(wrong_site), "--json")
    assert res.returncode == 1
    by = {f["check"]: f for f in json.loads(res.stdout)["findings"]}
    assert by["gres.type"]["message"].startswith("site gres type 'h100' is not on the nodes of partition gpu: "
                                                 "Slurm has gpu:a100:8")
    assert by["gres.type"]["fix"].startswith("set node_types.devnode.gpu.slurm_type: a100")
    assert by["node.cores_per_socket"]["message"].startswith(
        "site cores_per_socket 16 vs Slurm CoresPerSocket=32 on gpu[01-02]")
    assert (by["node.cores_per_socket"]["config_value"], by["node.cores_per_socket"]["slurm_value"]) == ("16", "32")
    assert "/run/slurmkit-devcluster/etc/slurm.conf" in by["node.cores_per_socket"]["slurm_where"]
    # with the type fixed, the count mismatch shows (a wrong type hides the count: there is nothing to count)
    d["node_types"]["devnode"]["gpu"]["slurm_type"] = "a100"
    wrong_site.write_text(yaml.safe_dump(d, sort_keys=False))
    human = sk_check("--site", str(wrong_site))
    assert human.returncode == 1
    assert "node_types.devnode.gpu.count: site config says 4 GPUs per node; Slurm has 8 gpu:a100 on gpu[01-02]" \
        in human.stdout
    assert "fix: set node_types.devnode.gpu.count: 8" in human.stdout
    assert "gres.conf on gpu01 has /dev/nvidia[4-7]" in human.stdout


def test_runs_as_an_unprivileged_user(devcluster, live_site):
    res = as_user("alice", [SK, "site", "check", "--site", str(live_site)], timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "result: 0 error(s), 0 warning(s)" in res.stdout


def test_without_slurm_commands_exits_3_without_traceback(devcluster, tmp_path):
    # An empty PATH: no scontrol (a controller that does not answer takes scontrol's own ~60 s to fail, and
    # ends in the same SlurmUnreachable with "did not answer within 30s").
    res = sk_check("--site", DEVSITE, env={**os.environ, "PATH": str(tmp_path)})
    assert res.returncode == 3
    assert "scontrol not found" in res.stderr and "Traceback" not in res.stderr
