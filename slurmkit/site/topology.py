"""`nvidia-smi topo -m`: parse the GPU x (GPU, NIC) matrix and pick each GPU's nearest compute HCA.

Why a parser of our own: the matrix is the only place that says how far each NIC is from each GPU, and real
outputs differ (tests/data/topo/ holds published ones): tab- or space-separated, a `GPU NUMA ID` column only
from about driver 525 on, NIC columns named `NIC0..` with a "NIC Legend" (newer drivers) or named `mlx5_0..`
directly (older ones), `N/A` cells, `SOC` for `SYS` on very old drivers, ANSI colours when copied from a TTY.

Distances, nearest first (nvidia-smi's legend): PIX (at most one PCIe bridge) < PXB (several bridges) <
PHB (through the host bridge) < NODE (between host bridges of one NUMA node) < SYS (across the SMP
interconnect). A NIC that is no GPU's nearest NIC is not a compute HCA: on every real output in tests/data/topo
the storage / front-end ports are farther from every GPU than that GPU's own rail NIC, whether they are SYS to all
of them (DGX A100: mlx5_8/9, or mlx5_4/5/10/11 on the 12-port system) or NODE-close to some (DGX H100/H200:
mlx5_1/2/7/8). Ties the matrix cannot break (a storage port PIX-close to GPU0 beside its rail NIC) are reported by
`surplus_ties`, for the caller to resolve from the ports' link layer or to refuse.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from slurmkit.errors import InputError, Problem

# Smaller is nearer. "SOC" is the pre-2017 driver name of SYS.
PCI_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
_CELL = re.compile(r"^(X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+|N/A)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Trailing header cells, matched with any spacing (copies re-space them) and in the short forms some copies use
# ("NUMA", "GPU NUMA"); "GPU NUMA" must be tried before "NUMA".
_TRAILING_RE = re.compile(r"CPU\s+Affinity|GPU\s+NUMA(?:\s+ID)?|NUMA(?:\s+Affinity)?")
_TRAILING_NAME = {"CPU": "CPU Affinity", "GPU": "GPU NUMA ID", "NUMA": "NUMA Affinity"}
_GPU_LABEL = re.compile(r"^GPU(\d+)$")
_LEGEND_NIC = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


@dataclass
class GpuRow:
    index: int
    links: dict[str, str]  # column label (GPU1, NIC0, mlx5_0) -> cell (NV12, PXB, X, ...)
    cpu_affinity: str | None = None  # kernel cpulist, e.g. 48-63,176-191
    numa_affinity: int | None = None
    gpu_numa_id: int | None = None  # only set on GPUs with their own NUMA node (Grace Hopper, MIG-less C2C)


@dataclass
class Topology:
    """One parsed `nvidia-smi topo -m`. NIC names are the RDMA device names (mlx5_0) where the output says them."""

    gpus: list[GpuRow]
    nics: list[str]  # NIC device names in column order (legend-resolved; NICn when the legend lacks it)
    columns: list[str]  # device column labels as printed
    has_gpu_numa_id: bool = False
    unnamed_nics: list[str] = field(default_factory=list)
    ignored_rows: list[str] = field(default_factory=list)  # rows that are neither a GPU nor a NIC column
    nic_labels: dict[str, str] = field(default_factory=dict, repr=False)  # NIC name -> its column label

    def gpu(self, index: int) -> GpuRow:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(index)

    def nic_distance(self, gpu: int, nic: str) -> str:
        return self.gpu(gpu).links[self.nic_labels[nic]]

    def nvlink_kind(self) -> str:
        """The NV# between most GPU pairs (NV12 on DGX A100, NV18 on HGX H100); 'none' on PCIe-only boxes.

        Mixed meshes (DGX-1: NV1 and NV2) report the most common bond; the planner only needs "NVLink or not".
        """
        kinds: Counter[str] = Counter()
        for g in self.gpus:
            for other in self.gpus:
                if other.index != g.index:
                    cell = g.links.get(f"GPU{other.index}", "")
                    if cell.startswith("NV"):
                        kinds[cell] += 1
        if not kinds:
            return "none"
        return max(kinds.items(), key=lambda kv: (kv[1], int(kv[0][2:])))[0]

    def nearest_nics(self, gpu: int, candidates: list[str] | None = None) -> tuple[str | None, list[str]]:
        """(distance, NICs at that distance) for one GPU, considering `candidates` (default: every NIC)."""
        best: tuple[int, str] | None = None
        found: list[str] = []
        for nic in candidates if candidates is not None else self.nics:
            cell = self.nic_distance(gpu, nic)
            rank = PCI_RANK.get(cell)
            if rank is None:
                continue
            if best is None or rank < best[0]:
                best, found = (rank, cell), [nic]
            elif rank == best[0]:
                found.append(nic)
        return (best[1] if best else None), found

    def _candidates(self, candidates: list[str] | None) -> list[str]:
        return list(self.nics) if candidates is None else [n for n in self.nics if n in set(candidates)]

    def storage_nics(self, candidates: list[str] | None = None) -> list[str]:
        """Candidate NICs that are no GPU's nearest candidate NIC: never for NCCL.

        One NIC SYS to every GPU with nothing nearer (an L40S box, tests/data/topo/nccl-tests-273-l40s-one-nic-sys.txt)
        is every GPU's nearest, so it stays a compute NIC.
        """
        cands = self._candidates(candidates)
        nearest: set[str] = set()
        for g in self.gpus:
            nearest.update(self.nearest_nics(g.index, cands)[1])
        return [n for n in cands if n not in nearest]

    def compute_nics(self, candidates: list[str] | None = None) -> list[str]:
        storage = set(self.storage_nics(candidates))
        return [n for n in self._candidates(candidates) if n not in storage]

    def _nearest_groups(self, candidates: list[str] | None) -> dict[tuple[str, ...], list[int]]:
        """GPUs grouped by their set of equally-nearest compute NICs."""
        compute = self.compute_nics(candidates)
        groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for g in sorted(self.gpus, key=lambda r: r.index):
            _, near = self.nearest_nics(g.index, compute)
            if near:
                groups[tuple(near)].append(g.index)
        return groups

    def surplus_ties(self, candidates: list[str] | None = None) -> list[tuple[list[int], str, list[str]]]:
        """(GPUs, distance, NICs) where more NICs tie for nearest than GPUs share them.

        Two GPUs behind one switch with two NICs (DGX A100) is a fair tie; GPU0 alone with three PIX NICs (a DGX
        H100's rail NIC plus the two ports of the storage card, tests/data/topo/mooncake-2039-*) is not: the matrix
        cannot say which one is the rail.
        """
        out = []
        for near, members in self._nearest_groups(candidates).items():
            if len(near) > len(members):
                out.append((members, self.nic_distance(members[0], near[0]), list(near)))
        return out

    def assign_hcas(self, candidates: list[str] | None = None) -> dict[int, str | None]:
        """Each GPU's nearest compute HCA. Ties are spread: GPUs sharing the same nearest set take them in turn.

        On a DGX A100 GPU0 and GPU1 are both PXB to mlx5_0 and mlx5_1; GPU0 gets mlx5_0 and GPU1 mlx5_1, so
        two ranks never share one HCA while its neighbour idles.
        """
        out: dict[int, str | None] = {g.index: None for g in self.gpus}
        for near, members in self._nearest_groups(candidates).items():
            for k, idx in enumerate(members):
                out[idx] = near[k % len(near)]
        return dict(sorted(out.items()))


def _num(cell: str | None) -> int | None:
    if cell is None or cell in ("N/A", ""):
        return None
    try:
        return int(cell)
    except ValueError:
        return None


def parse_topo(text: str, source: str = "<nvidia-smi topo -m>") -> Topology:
    """Parse the output of `nvidia-smi topo -m` (matrix, then optional Legend and NIC Legend)."""
    lines = _ANSI.sub("", text).replace("\r", "").splitlines()
    # The header is the first line whose first token is GPU0 and that is not itself a GPU0 row (a row's second
    # token is a cell such as X or NV12; the header's is GPU1 or a NIC label or "CPU").
    head_at = None
    for i, ln in enumerate(lines):
        toks = ln.split()
        if toks[:1] == ["GPU0"] and (len(toks) == 1 or not _CELL.match(toks[1])):
            head_at = i
            break
    if head_at is None:
        raise InputError(Problem("no GPU0 header line found: this is not `nvidia-smi topo -m` output",
                                 file=source, hint="save the output of `nvidia-smi topo -m` unchanged"))
    header = lines[head_at]
    m = _TRAILING_RE.search(header)
    columns = (header[:m.start()] if m else header).split()
    trailing = [_TRAILING_NAME[t.split()[0]] for t in _TRAILING_RE.findall(header[m.start():])] if m else []
    gpus: list[GpuRow] = []
    nic_cols = [c for c in columns if not _GPU_LABEL.match(c)]
    ignored: list[str] = []
    legend: dict[str, str] = {}
    in_matrix = True
    for lineno, ln in enumerate(lines[head_at + 1:], start=head_at + 2):
        stripped = ln.strip()
        if in_matrix and (not stripped or stripped.startswith("Legend")):
            in_matrix = False
        if not in_matrix:
            lm = _LEGEND_NIC.match(ln)
            if lm:
                legend[lm.group(1)] = lm.group(2)
            continue
        if set(stripped) <= {"-", "="}:
            continue
        toks = stripped.split()
        label, cells, rest = toks[0], toks[1:1 + len(columns)], toks[1 + len(columns):]
        gm = _GPU_LABEL.match(label)
        if not gm and label not in nic_cols:
            ignored.append(label)  # e.g. a MIG or NVSwitch row some tools add; not part of the GPU x NIC matrix
            continue
        if len(cells) < len(columns):
            raise InputError(Problem(f"row {label} has {len(cells)} cells, the header names {len(columns)} "
                                     "columns", file=source, line=lineno,
                                     hint="the copy may be truncated or re-wrapped; save the output unchanged"))
        bad = [c for c in cells if not _CELL.match(c)]
        if bad:
            raise InputError(Problem(f"row {label}: {bad[0]!r} is not a topology cell (X, NV#, PIX, PXB, PHB, "
                                     "NODE, SYS)", file=source, line=lineno))
        if not gm:
            continue  # NIC rows repeat the GPU rows' information (the matrix is symmetric)
        extra = dict(zip(trailing, rest, strict=False))
        cpu = extra.get("CPU Affinity")
        gpus.append(GpuRow(index=int(gm.group(1)), links=dict(zip(columns, cells, strict=True)),
                           cpu_affinity=None if cpu in (None, "N/A") else cpu,
                           numa_affinity=_num(extra.get("NUMA Affinity")),
                           gpu_numa_id=_num(extra.get("GPU NUMA ID"))))
    if not gpus:
        raise InputError(Problem("the matrix has no GPU rows", file=source))
    have = {g.index for g in gpus}
    missing = [c for c in columns if _GPU_LABEL.match(c) and int(c[3:]) not in have]
    if missing:
        got = ", ".join(f"GPU{i}" for i in sorted(have))
        raise InputError(Problem(f"the header names {', '.join(missing)} but there is no row for "
                                 f"{'it' if len(missing) == 1 else 'them'} (rows found: {got})", file=source,
                                 hint="the copy is truncated; save the whole output of `nvidia-smi topo -m`"))
    names, unnamed = [], []
    for col in nic_cols:
        if re.match(r"^NIC\d+$", col):
            if col in legend:
                names.append(legend[col])
            else:
                names.append(col)
                unnamed.append(col)
        else:
            names.append(col)  # older drivers print the device name (mlx5_0) as the column label
    return Topology(gpus=sorted(gpus, key=lambda g: g.index), nics=names, columns=columns,
                    has_gpu_numa_id="GPU NUMA ID" in trailing, unnamed_nics=unnamed, ignored_rows=ignored,
                    nic_labels=dict(zip(names, nic_cols, strict=True)))
