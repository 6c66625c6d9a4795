"""Cold-process `sk render` of the 2-node torchrun example vs `python -c pass` and vs submitit.

submitit generates its sbatch text for the same job shape (2 nodes, 8 GPUs/node, 1 task per node, 32 CPUs) in a
fresh process, so all three pay interpreter start-up. Prints medians of repeated runs measured in one run.

    .venv/bin/python bench/render.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SK = str(Path(PY).parent / "sk")

SUBMITIT = """
from submitit.slurm.slurm import _make_sbatch_string
text = _make_sbatch_string(command="python train.py --config configs/7b.yaml", folder="/tmp/sk-bench-submitit",
    job_name="llm-pretrain", partition="gpu", time=10, nodes=2, ntasks_per_node=1, gpus_per_node=8,
    cpus_per_task=32, mem_per_gpu="8G")
assert "#SBATCH" in text
"""


def timed(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    cases = {
        "python -c pass": [PY, "-c", "pass"],
        "submitit sbatch text": [PY, "-c", SUBMITIT],
        "sk render": [SK, "render", str(ROOT / "examples/torchrun-2node.yaml"), "--site",
                      str(ROOT / "site_config/dgx-a100.yaml")],
    }
    for cmd in cases.values():  # warm the page cache
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    med = {}
    for name, cmd in cases.items():
        ms = timed(cmd, args.runs)
        med[name] = statistics.median(ms)
        print(f"{name:<22} median {med[name]:7.1f} ms  (min {min(ms):.1f}, max {max(ms):.1f}, n={args.runs})")
    print(f"sk render / submitit: {med['sk render'] / med['submitit sbatch text']:.2f}   "
          f"sk render - python startup: {med['sk render'] - med['python -c pass']:.1f} ms   "
          f"goal: <= 150 ms and ratio <= 1.0")


if __name__ == "__main__":
    main()
