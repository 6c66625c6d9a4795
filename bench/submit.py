"""Submission latency on the devcluster (Slurm 25.11): slurmkit's backends against plain sbatch, in one run.

Everything runs as the unprivileged devcluster user (default alice) because the rest backend can only reach
slurmrestd over that user's own socket (rest_auth/local); the baselines run as the same user the same way, with
the environment `contrib/devcluster/env` prints (the running Slurm's commands first on PATH, its SLURM_CONF).
Every job is submitted held (--hold) so nothing runs on the shared cluster, is named be-bench-*, and is cancelled
at the end. Rows (median of --runs, interleaved round-robin so drift hits every row alike):

  in-process (one Python process, the backend call only):
    sbatch --wrap (subprocess)      baseline: raw `sbatch --parsable --hold --wrap true`
    sbatch < script (subprocess)    the same pre-rendered script the backends submit, on stdin
    CliBackend.submit               slurmkit's cli backend (sbatch + the tag comment)
    RestBackend.submit              slurmkit's rest backend (one POST over the unix socket)
    PyslurmBackend.submit           slurmkit's pyslurm backend (libslurm in the process: no process start)
  whole command (fresh process each time):
    sk submit --backend cli / rest / pyslurm
                                    spec -> plan -> render -> submit, interpreter start-up included; the same spec
                                    each time, so its validation comes from sk's per-user cache (inputs.py)
    sk submit --backend cli, edited the spec's content changes before each run: validated again (a cache miss)
  sweep (--sweep N, 0 skips): `sk submit` of an N-task array spec vs N separate `sbatch` calls.

    .venv/bin/python bench/submit.py [--runs 15] [--sweep 1000] [--user alice]   (as root: it runs runuser)
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import pwd
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SK = str(Path(PY).parent / "sk")
SITE = str(ROOT / "site_config" / "devcluster.yaml")
SOCKET = "unix:/run/slurmkit-devcluster/rest-{user}.sock"
KINDS = ("cli", "rest", "pyslurm")

SPEC = """name: be-bench-{kind}
launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
sbatch_extra: {{hold: null}}
command: [bash, -c, "true"]
"""
SWEEP = SPEC.replace("command:", "array: {{grid: {{i: [{values}]}}}}\ncommand:")

# Runs as the bench user: times the backend calls in one process and prints the samples (ms) as JSON.
IN_PROCESS = r"""
import json, subprocess, sys, time
from slurmkit.backends.cli import CliBackend
from slurmkit.backends.pyslurm import PyslurmBackend
from slurmkit.backends.rest import RestBackend
from slurmkit.plan import make_plan
from slurmkit.render import build_request, render
from slurmkit.site.model import load_site
from slurmkit.spec import load_spec

spec_path, site_path, url, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
site = load_site(site_path)
spec, src = load_spec(spec_path, [])
plan = make_plan(spec, site, src, {})
script = render(plan)
cli, rest, pyslurm = CliBackend(), RestBackend(url), PyslurmBackend()

def sbatch(argv, stdin=None):
    out = subprocess.run(argv, input=stdin, capture_output=True, text=True, check=True).stdout
    return int(out.strip().split(";")[0])

cases = {
    "sbatch --wrap (subprocess)": lambda: sbatch(["sbatch", "--parsable", "--hold", "-J", "be-bench-wrap",
                                                   "--gpus-per-node=a100:1", "--mem-per-gpu=100M", "-t", "2",
                                                   "--wrap", "true"]),
    "sbatch < script (subprocess)": lambda: sbatch(["sbatch", "--parsable"], script),
    "CliBackend.submit": lambda: cli.submit(build_request(plan, script)).job_id,
    "RestBackend.submit": lambda: rest.submit(build_request(plan, script)).job_id,
    "PyslurmBackend.submit": lambda: pyslurm.submit(build_request(plan, script)).job_id,
}
samples = {k: [] for k in cases}
ids = []
for name, fn in cases.items():  # warm-up (imports, page cache, first connection)
    ids.append(fn())
for _ in range(runs):
    for name, fn in cases.items():
        t = time.perf_counter()
        ids.append(fn())
        samples[name].append((time.perf_counter() - t) * 1000)
print(json.dumps({"samples": samples, "ids": ids}))
"""


def as_user(user: str, cmd: list[str], env: dict[str, str], cwd: str | None = None) -> subprocess.CompletedProcess:
    clean = ["env", "-i", *(f"{k}={v}" for k, v in env.items())]
    return subprocess.run(["runuser", "-u", user, "--", *clean, *cmd], capture_output=True, text=True, cwd=cwd,
                          check=True)


def devcluster_env() -> dict[str, str]:
    """PATH (the running Slurm's bin first) and SLURM_CONF, as `contrib/devcluster/env` prints them."""
    out = subprocess.run([str(ROOT / "contrib" / "devcluster" / "env")], capture_output=True, text=True,
                         check=True).stdout
    env: dict[str, str] = {}
    for line in out.splitlines():
        name, _, value = line.removeprefix("export ").partition("=")
        if name in ("PATH", "SLURM_CONF"):
            value = shlex.split(value.replace('"$PATH"', ""))[0].rstrip(":") if value else ""
            env[name] = f"{value}:/usr/bin:/bin" if name == "PATH" else value
    return env


def job_ids_from_sk(stdout: str) -> list[int]:
    return [item["job_id"] for item in json.loads(stdout)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--sweep", type=int, default=1000, help="tasks in the sweep comparison (0: skip it)")
    ap.add_argument("--user", default="alice")
    args = ap.parse_args()
    pw = pwd.getpwnam(args.user)
    env = {"PATH": "/usr/bin:/bin", "HOME": pw.pw_dir, "USER": args.user, "LOGNAME": args.user, "LANG": "C.UTF-8",
           "SK_REST_URL": SOCKET.format(user=args.user), **devcluster_env()}
    slurm = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, env=env).stdout.strip()
    # Bytecode as `pip install` leaves it, even under PYTHONDONTWRITEBYTECODE or for a user who cannot write
    # __pycache__: otherwise every run would pay for compiling slurmkit's sources.
    compileall.compile_dir(ROOT / "slurmkit", quiet=1)
    work = tempfile.mkdtemp(prefix="be-bench-", dir="/tmp")
    os.chown(work, pw.pw_uid, -1)
    ids: list[int] = []
    try:
        for kind in KINDS:
            Path(work, f"{kind}.yaml").write_text(SPEC.format(kind=kind))
        # In-process backend calls.
        run = as_user(args.user, [PY, "-c", IN_PROCESS, f"{work}/cli.yaml", SITE, env["SK_REST_URL"],
                                  str(args.runs)], env, cwd=work)
        result = json.loads(run.stdout)
        ids += result["ids"]
        rows = {k: statistics.median(v) for k, v in result["samples"].items()}
        # Whole commands, fresh process each, interleaved round-robin. The baseline is the same user's raw
        # sbatch through runuser (the same runuser cost as sk's rows).
        baseline = "sbatch --wrap (runuser)"
        cmds = {baseline: ["sbatch", "--parsable", "--hold", "-J", "be-bench-wrap", "--wrap", "true"]}
        cmds.update({f"sk submit --backend {k}": [SK, "submit", f"{k}.yaml", "--site", SITE, "--backend", k,
                                                  "--json"] for k in KINDS})
        edited = "sk submit --backend cli, edited"
        cmds[edited] = [SK, "submit", "edited.yaml", "--site", SITE, "--backend", "cli", "--json"]
        spec_text = SPEC.format(kind="edited")
        # sk's cache is keyed by the file name and content: a nonce keeps the edits of this run new to it.
        nonce = os.urandom(4).hex()

        def submit_once(name: str, run: int) -> float:
            if name == edited:  # new content, so the spec is validated again (not timed)
                Path(work, "edited.yaml").write_text(spec_text + f"# edit {nonce} {run}\n")
            t = time.perf_counter()
            out = as_user(args.user, cmds[name], env, cwd=work).stdout
            ms = (time.perf_counter() - t) * 1000
            ids.extend([int(out.strip().split(";")[0])] if name == baseline else job_ids_from_sk(out))
            return ms

        whole: dict[str, list[float]] = {k: [] for k in cmds}
        for name in cmds:  # warm-up
            submit_once(name, -1)
        for run in range(args.runs):
            for name in cmds:
                whole[name].append(submit_once(name, run))

        base = rows["sbatch --wrap (subprocess)"]
        print(f"slurmkit submit latency, devcluster ({slurm}), user {args.user}, median of {args.runs}, "
              "interleaved\n")
        print(f"{'in-process':<34}{'median ms':>10}{'x baseline':>12}{'+ ms':>9}")
        for name, ms in rows.items():
            print(f"{name:<34}{ms:>10.1f}{ms / base:>12.2f}{ms - base:>9.1f}")
        wbase = statistics.median(whole[baseline])
        print(f"\n{'whole command (fresh process)':<34}{'median ms':>10}{'x baseline':>12}{'+ ms':>9}")
        for name in cmds:
            ms = statistics.median(whole[name])
            print(f"{name:<34}{ms:>10.1f}{ms / wbase:>12.2f}{ms - wbase:>9.1f}")
        print("goals (issue 12): PyslurmBackend.submit <= 0.5x sbatch; sk submit via pyslurm <= +150 ms")

        if args.sweep:
            values = ", ".join(str(i) for i in range(args.sweep))
            # A sweep sk has not seen (validated from scratch), like a user's new sweep.
            Path(work, "sweep.yaml").write_text(SWEEP.format(kind="sweep", values=values) + f"# {nonce}\n")
            t = time.perf_counter()
            out = as_user(args.user, [SK, "submit", "sweep.yaml", "--site", SITE, "--backend", "cli", "--json"],
                          env, cwd=work).stdout
            sweep_ms = (time.perf_counter() - t) * 1000
            ids += job_ids_from_sk(out)
            loop = (f"for i in $(seq {args.sweep}); do sbatch --parsable --hold -J be-bench-loop --wrap true "
                    ">/dev/null || exit 1; done")
            t = time.perf_counter()
            as_user(args.user, ["bash", "-c", loop], env, cwd=work)
            loop_ms = (time.perf_counter() - t) * 1000
            print(f"\nsweep of {args.sweep} tasks: sk submit (one array) {sweep_ms:.0f} ms; "
                  f"{args.sweep} x sbatch {loop_ms:.0f} ms; speed-up {loop_ms / sweep_ms:.1f}x (goal >= 20x)")
    finally:
        if ids:
            subprocess.run(["scancel", *map(str, ids)], check=False)
        subprocess.run(["scancel", "-u", args.user, "-n", "be-bench-loop"], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
