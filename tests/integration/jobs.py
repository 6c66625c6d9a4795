"""Helpers for integration tests that run rendered scripts on the devcluster: render, sbatch, wait, read."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SK = str(Path(sys.executable).parent / "sk")
DEVSITE = str(ROOT / "site_config" / "devcluster.yaml")
# The running devcluster's Slurm commands and daemons: Debian's 22.05 in /usr/bin and /usr/sbin, or 25.11 built
# from source (its prefix, linked into /usr/local/bin by contrib/devcluster/up). A minimal PATH starts there.
SLURM_BIN = str(Path(shutil.which("sbatch") or "/usr/bin/sbatch").resolve().parent)
SLURM_SBIN = str(Path(SLURM_BIN).parent / "sbin")
MIN_PATH = f"{SLURM_BIN}:/usr/bin:/bin" if SLURM_BIN != "/usr/bin" else "/usr/bin:/bin"
# A one-GPU, one-process job; format with name= and cmd= (a bash command without double quotes).
SPEC = """name: {name}
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
command: [bash, -c, "{cmd}"]
"""
TERMINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
            "DEADLINE"}


def render_and_sbatch(spec_text: str, workdir: Path, site: str = DEVSITE, name: str = "job.yaml",
                      env: dict[str, str] | None = None) -> int:
    """Render with `sk render` and submit with plain sbatch; `env` is the submitting shell's environment."""
    spec = workdir / name
    spec.write_text(spec_text)
    script = subprocess.run([SK, "render", str(spec), "--site", site], check=True, capture_output=True,
                            text=True).stdout
    out = subprocess.run(["sbatch", "--parsable"], input=script, check=True, capture_output=True, text=True,
                         cwd=workdir, env=env).stdout
    return int(out.strip().split(";")[0])


def state(job_id: int | str) -> str:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(job_id), "-o", "State"], capture_output=True,
                         text=True).stdout.split()
    return out[0].split()[0] if out else "PENDING"


def wait(job_id: int | str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = state(job_id)
        if s in TERMINAL:
            return s
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id} still {state(job_id)} after {timeout}s")


def fields(line: str) -> dict[str, str]:
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
