"""Cold-process `sk render` of the 2-node torchrun example vs `python -c pass` and vs submitit.

submitit generates its sbatch text for the same job shape (2 nodes, 8 GPUs/node, 1 task per node, 32 CPUs) in a
fresh process, so all of them pay interpreter start-up. Every run is a fresh process; rows are interleaved
round-robin so that load from other processes hits them alike. Prints medians of repeated runs measured in one run.

`sk render` keeps two per-user caches (~/.cache/slurmkit): compiled templates and validated specs/site configs
(slurmkit/config/cache.py). The rows show each case a user meets:
  sk render                 the same spec and site as before (both caches warm): the usual re-render/submit
  sk render, edited spec    the spec changed since the last render (its validation is redone; site cached)
  sk render, empty cache    the first run ever (nothing cached: validation, YAML parsing, template compiling)

    .venv/bin/python bench/render.py [--runs 15]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SK = str(Path(PY).parent / "sk")
EXAMPLE = ROOT / "examples" / "torchrun-2node.yaml"
SITE = str(ROOT / "site_config" / "dgx-a100.yaml")

SUBMITIT = """
from submitit.slurm.slurm import _make_sbatch_string
text = _make_sbatch_string(command="python train.py --config configs/7b.yaml", folder="/tmp/sk-bench-submitit",
    job_name="llm-pretrain", partition="gpu", time=10, nodes=2, ntasks_per_node=1, gpus_per_node=8,
    cpus_per_task=32, mem_per_gpu="8G")
assert "#SBATCH" in text
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    # Bytecode as `pip install` leaves it, even under PYTHONDONTWRITEBYTECODE or for a user who cannot write
    # __pycache__: otherwise every run would pay for compiling slurmkit's sources.
    compileall.compile_dir(ROOT / "slurmkit", quiet=1)
    work = Path(tempfile.mkdtemp(prefix="sk-bench-render-"))
    edited = work / "torchrun-2node.yaml"
    counter = iter(range(10**9))
    nonce = os.urandom(4).hex()  # the cache is keyed by file name and content: edits new to it in every run

    def edit_spec() -> dict[str, str] | None:
        edited.write_text(EXAMPLE.read_text() + f"# edit {nonce} {next(counter)}\n")  # new to sk's cache
        return None

    def empty_cache() -> dict[str, str] | None:
        fresh = work / f"cache-{next(counter)}"
        return {**os.environ, "XDG_CACHE_HOME": str(fresh)}

    # name -> (command, prepare: runs before each timed run (not timed), returns the environment or None)
    cases: dict[str, tuple[list[str], Callable[[], dict[str, str] | None]]] = {
        "python -c pass": ([PY, "-c", "pass"], lambda: None),
        "submitit sbatch text": ([PY, "-c", SUBMITIT], lambda: None),
        "sk render": ([SK, "render", str(EXAMPLE), "--site", SITE], lambda: None),
        "sk render, edited spec": ([SK, "render", str(edited), "--site", SITE], edit_spec),
        "sk render, empty cache": ([SK, "render", str(EXAMPLE), "--site", SITE], empty_cache),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for rnd in range(args.runs + 1):  # round 0 warms the page cache and sk's caches
            for name, (cmd, prepare) in cases.items():
                env = prepare()
                t = time.perf_counter()
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
                if rnd:
                    samples[name].append((time.perf_counter() - t) * 1000)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {name: statistics.median(ms) for name, ms in samples.items()}
    base, submitit = med["python -c pass"], med["submitit sbatch text"]
    print(f"cold processes, median of {args.runs} (interleaved)\n")
    print(f"{'':<24}{'median ms':>10}{'min':>8}{'max':>8}{'- python':>10}{'/ submitit':>12}")
    for name, ms in samples.items():
        print(f"{name:<24}{med[name]:>10.1f}{min(ms):>8.1f}{max(ms):>8.1f}{med[name] - base:>10.1f}"
              f"{med[name] / submitit:>12.2f}")
    print("goal (issue 2): sk render <= 150 ms median and sk render / submitit <= 1.0")


if __name__ == "__main__":
    main()
