"""The `nvidia-smi topo -m` parser on real published outputs (tests/data/topo/, sources in SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.errors import InputError
from slurmkit.topology import parse_topo

TOPO = Path(__file__).parent / "data" / "topo"


def topo(name: str):
    return parse_topo((TOPO / name).read_text(), source=name)


def test_dgx_a100_tabs_without_gpu_numa_id_column():
    t = topo("dgx-a100-40g-driver525.txt")
    assert [g.index for g in t.gpus] == list(range(8))
    assert not t.has_gpu_numa_id
    assert [g.numa_affinity for g in t.gpus] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert t.gpu(4).cpu_affinity == "112-127,240-255"
    assert t.nvlink_kind() == "NV12"
    assert t.nics == [f"mlx5_{i}" for i in range(10)]  # from the NIC Legend


def test_dgx_a100_storage_nics_are_sys_to_every_gpu_and_ties_are_spread():
    t = topo("dgx-a100-40g-driver525.txt")
    assert t.storage_nics() == ["mlx5_8", "mlx5_9"]
    # GPU0 and GPU1 are both PXB to mlx5_0 and mlx5_1: one each, not both on mlx5_0.
    assert t.nearest_nics(0) == ("PXB", ["mlx5_0", "mlx5_1"])
    assert t.assign_hcas() == {i: f"mlx5_{i}" for i in range(8)}


def test_hgx_h100_space_separated_with_na_gpu_numa_id():
    t = topo("hgx-h100-8nic-spaces.txt")
    assert t.has_gpu_numa_id
    assert all(g.gpu_numa_id is None for g in t.gpus)  # printed as N/A
    assert [g.numa_affinity for g in t.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert t.gpu(5).cpu_affinity == "48-95,144-191"
    assert t.nvlink_kind() == "NV18"
    assert t.nearest_nics(5) == ("PIX", ["mlx5_5"])
    assert t.storage_nics() == []


def test_pcie_only_box_nearest_is_node_level():
    t = topo("asus-esc8000a-e12-4x-rtx6000ada-pcie.txt")
    assert t.nvlink_kind() == "none"
    assert t.gpu_link(0, 1) == "NODE"
    assert t.nearest_nics(2) == ("NODE", ["mlx5_2", "mlx5_3"])
    assert t.assign_hcas() == {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_2", 3: "mlx5_3"}


def test_two_gpus_old_style_nic_columns_named_by_device():
    t = topo("princeton-della-2x-a100-pcie.txt")
    assert t.nics == ["mlx5_0", "mlx5_1"] and not t.unnamed_nics
    assert [g.numa_affinity for g in t.gpus] == [0, 1]
    assert t.assign_hcas() == {0: "mlx5_0", 1: "mlx5_1"}


def test_power9_sparse_numa_ids_and_nv3():
    t = topo("princeton-traverse-4x-v100-power9.txt")
    assert [g.numa_affinity for g in t.gpus] == [0, 0, 8, 8]
    assert t.nvlink_kind() == "NV3"
    assert t.gpu_link(0, 2) == "SYS"
    assert t.assign_hcas() == {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_2", 3: "mlx5_3"}


def test_nic_without_legend_entry_is_reported_unnamed():
    text = (TOPO / "dgx-a100-40g-driver525.txt").read_text()
    cut = text[: text.index("  NIC8: mlx5_8")]  # the same output with its legend cut short
    t = parse_topo(cut)
    assert t.unnamed_nics == ["NIC8", "NIC9"]
    assert t.storage_nics() == ["NIC8", "NIC9"]


def test_not_topo_output_is_a_located_input_error():
    with pytest.raises(InputError) as err:
        parse_topo("nvidia-smi: command not found\n", source="topo-m.txt")
    assert "GPU0" in err.value.format() and "topo-m.txt" in err.value.format()


def test_truncated_row_names_line():
    text = (TOPO / "hgx-h100-8nic-spaces.txt").read_text().splitlines()
    text[3] = text[3][:40]  # GPU2's row cut off mid-way, as a bad copy would
    with pytest.raises(InputError) as err:
        parse_topo("\n".join(text), source="x.txt")
    assert err.value.problems[0].line == 4 and "GPU2" in err.value.problems[0].message
