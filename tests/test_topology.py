"""The `nvidia-smi topo -m` parser on real published outputs (tests/data/topo/, sources in its README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.errors import InputError
from slurmkit.site.topology import parse_topo

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
    assert t.gpu(0).links["GPU1"] == "NODE"
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
    assert t.gpu(0).links["GPU2"] == "SYS"
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


def test_six_k80_gpus_2016_driver_soc_cells_and_space_separated_header():
    # Header split by single spaces, rows by tabs, `SOC` for SYS, no NICs, no NUMA column; a shell prompt above.
    t = topo("nccl-19-6x-k80-soc-2016.txt")
    assert [g.index for g in t.gpus] == list(range(6)) and t.nics == []
    assert t.gpu(0).links["GPU1"] == "PIX" and t.gpu(0).links["GPU2"] == "SOC" and t.gpu(2).links["GPU4"] == "PHB"
    assert [g.cpu_affinity for g in t.gpus] == ["0-7,16-23"] * 2 + ["8-15,24-31"] * 4
    assert all(g.numa_affinity is None for g in t.gpus)
    assert t.nvlink_kind() == "none" and t.assign_hcas() == dict.fromkeys(range(6))


def test_three_gpus_partial_nvlink_nearest_is_phb_for_the_pcie_gpu():
    t = topo("nccl-tests-320-3gpu-nv4-phb.txt")
    assert t.gpu(0).links["GPU1"] == "NV4" and t.gpu(0).links["GPU2"] == "NODE"
    assert t.nvlink_kind() == "NV4"
    assert t.nearest_nics(2) == ("PHB", ["mlx5_0", "mlx5_1"])
    assert t.nearest_nics(0) == ("NODE", ["mlx5_0", "mlx5_1"])
    assert t.storage_nics() == []
    assert t.assign_hcas() == {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_0"}


def test_single_nic_sys_to_every_gpu_is_not_storage_when_it_is_the_only_one():
    t = topo("nccl-tests-273-l40s-one-nic-sys.txt")
    assert t.unnamed_nics == ["NIC0"]  # the report has no NIC Legend
    assert t.storage_nics() == [] and t.compute_nics() == ["NIC0"]
    assert t.nearest_nics(5) == ("SYS", ["NIC0"])
    assert [g.numa_affinity for g in t.gpus] == [0] * 4 + [1] * 4


def test_sys_nic_is_storage_when_another_nic_is_nearer():
    # The same rule on the DGX A100: mlx5_8/9 are SYS to all GPUs while mlx5_0..7 are PXB to some.
    t = topo("dgx-a100-40g-driver525.txt")
    assert t.storage_nics() == ["mlx5_8", "mlx5_9"]
    assert t.compute_nics() == [f"mlx5_{i}" for i in range(8)]


def test_truncated_sixteen_gpu_copy_is_refused_naming_the_missing_rows():
    # The only public DGX-2 (16 GPUs, NV6) output found ends after GPU3's row; parsing it must not yield 4 GPUs.
    with pytest.raises(InputError) as err:
        topo("nccl-tests-78-dgx2-16gpu-first-rows.txt")
    msg = err.value.problems[0].message
    assert "GPU4, GPU5" in msg and "GPU15" in msg and "rows found: GPU0, GPU1, GPU2, GPU3" in msg


def test_sixteen_gpu_wide_rows_parse_cell_by_cell():
    # The four complete DGX-2 rows restricted to the GPU0-3 and NIC columns: a square sub-matrix of the real
    # output (nothing invented, columns only dropped), so the 16-GPU-wide rows are checked cell by cell.
    text = (TOPO / "nccl-tests-78-dgx2-16gpu-first-rows.txt").read_text().splitlines()
    head = text[1].split()
    keep = [i for i, c in enumerate(head) if not (c.startswith("GPU") and int(c[3:]) >= 4)]
    lines = ["\t" + "\t".join(head[i] for i in keep[:-2]) + "\tCPU Affinity"]
    for row in text[2:]:
        cells = row.split()
        lines.append("\t".join([cells[0]] + [cells[i + 1] for i in keep[:-2]] + [cells[-1]]))
    t = parse_topo("\n".join(lines))
    assert t.nics == [f"mlx5_{i}" for i in range(10)]
    assert t.gpu(1).links["GPU3"] == "NV6" and t.nvlink_kind() == "NV6"
    assert t.nearest_nics(2) == ("PIX", ["mlx5_1"])
    assert t.gpu(3).cpu_affinity == "0-23,48-71"


def test_storage_ports_node_close_to_some_gpus_are_no_gpus_nearest():
    # DGX H200-style: mlx5_1/2 are NODE to GPU0-3 (not SYS), but each of those GPUs has its own PXB NIC.
    t = topo("h200-12nic-storage-node-distributedai.txt")
    assert t.storage_nics() == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    assert t.nearest_nics(0) == ("PXB", ["mlx5_0"]) and t.surplus_ties() == []


def test_pix_tie_with_more_nics_than_gpus_is_reported():
    t = topo("mooncake-2039-h100-12nic-cpuset-spaces.txt")
    assert t.surplus_ties() == [([0], "PIX", ["mlx5_0", "mlx5_1", "mlx5_2"]),
                                ([4], "PIX", ["mlx5_6", "mlx5_7", "mlx5_8"])]
    # with the storage ports removed from the candidates, the rails are plain
    rails = [n for n in t.nics if n not in ("mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8")]
    assert t.surplus_ties(rails) == [] and list(t.assign_hcas(rails).values()) == rails
    # a fair tie (DGX A100: two GPUs, two PXB NICs) is not reported
    assert topo("dgx-a100-40g-driver525.txt").surplus_ties() == []


def test_respaced_short_header_and_indented_copy_parse():
    t = topo("h200-bond-respaced-header-weiziyang.txt")  # "CPU Affinity   NUMA  GPU NUMA", then a dashed rule
    assert [g.numa_affinity for g in t.gpus] == [0] * 4 + [1] * 4 and t.has_gpu_numa_id
    assert t.gpu(0).cpu_affinity == "0,2-47,96-143" and t.nics[-1] == "mlx5_bond_0"
    t = topo("h100-8x-indented-copy.txt")
    assert [g.numa_affinity for g in t.gpus] == [0] * 4 + [1] * 4 and t.gpu(7).cpu_affinity == "48-95,144-191"
    t = topo("mooncake-2039-h100-12nic-cpuset-spaces.txt")  # "CPU Affinity     NUMA Affinity" (5 spaces)
    assert [g.numa_affinity for g in t.gpus] == [0] * 4 + [1] * 4
