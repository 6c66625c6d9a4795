"""Accounting path: jobcomp hook wall time per job, and ingest throughput into SQLite.

Hook: one real 2-GPU job runs on the devcluster; then its jobcomp hook is run the way slurmctld runs it - the
installed wrapper (contrib/slurm/sk-hook via the devcluster's bin/sk-jobcomp, Slurm's 22.05 variables with the
job's values, the real `scontrol show job`), writing into a private spool - next to `sk hook jobcomp` through
the console script, `python -c pass` and `python -S -E -c pass` (what the wrapper starts). The cases are
interleaved run by run, so load from other work on the machine hits them alike. Goal: wrapper p50 <= 50 ms.

Ingest: N spooled records (a real hook record under made-up job ids) into a fresh SQLite store with
`slurmkit.accounting.ingest.ingest`, vs reading and parsing the same files alone and vs inserting the same rows
with executemany alone (the two halves of the work). Medians of repeated runs. Goal: >= 5,000 records/s.

    .venv/bin/python bench/accounting.py [--runs 101] [--records 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slurmkit.accounting.ingest import ingest  # noqa: E402
from slurmkit.record import JOB_COLUMNS  # noqa: E402
from slurmkit.store.db import open_store  # noqa: E402
from tests.integration import accounting as acct  # noqa: E402

PY = sys.executable


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def finished_job() -> dict:
    job_id = acct.sbatch("--gpus=a100:2", "-t", "2", "--wrap", "sleep 1", name=acct.tag("bench"))
    acct.wait_final([job_id], timeout=120)
    [run] = acct.sacct_runs([job_id])
    return run


def bench_hook(runs: int) -> dict[str, list[float]]:
    job = finished_job()
    env = acct.jobcomp_env(job)  # what slurmctld passes; no PATH, like jobcomp/script
    spool_dir = Path(tempfile.mkdtemp(prefix="sk-bench-spool-"))
    hook_env = {**env, "SK_SPOOL": str(spool_dir), "SK_HOOK_LOG": str(spool_dir / "hooks.log")}
    cases = {
        "python -c pass": ([PY, "-c", "pass"], env),
        "python -S -E -c pass": ([PY, "-S", "-E", "-c", "pass"], env),
        "scontrol show job -o": (["scontrol", "show", "job", "-o", str(job["job_id"])],
                                 {**env, "PATH": os.environ["PATH"]}),
        "sk hook jobcomp (console script)": ([acct.SK, "hook", "jobcomp"],
                                             {**hook_env, "PATH": os.environ["PATH"]}),
        "jobcomp wrapper, as Slurm runs it": ([str(acct.DC_DIR / "bin" / "sk-jobcomp")], hook_env),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (cmd, e) in cases.items():
            t = time.perf_counter()
            subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            times[name].append((time.perf_counter() - t) * 1000)
    written = list(spool_dir.glob("job-*.json"))
    assert len(written) == 2 * runs, f"expected {2 * runs} records, found {len(written)}"
    rec = json.loads(written[0].read_text())
    assert rec["gpus"] == 2 and rec["flags"] is None, rec  # a complete record, not a flagged one
    log = (spool_dir / "hooks.log").read_text() if (spool_dir / "hooks.log").exists() else ""
    assert log == "", log
    shutil.rmtree(spool_dir)
    return times


def template() -> dict:
    rows = json.loads((ROOT / "tests/data/accounting/store-rows-jobcomp.json").read_text())
    return {"version": 1, "kind": "job", **{k: v for k, v in rows[2].items() if k != "ingested_at"}}


def make_spool(d: Path, n: int) -> None:
    base = template()
    d.mkdir(parents=True)
    for i in range(n):
        rec = {**base, "cluster": "bench", "job_id": 1_000_000 + i}
        (d / f"job-bench-{rec['job_id']}-0-{i}.json").write_text(json.dumps(rec, separators=(",", ":")))


def bench_ingest(n: int, repeats: int) -> dict[str, list[float]]:
    rates: dict[str, list[float]] = {"sk admin ingest (files -> SQLite)": [], "read + parse files only": [],
                                     "executemany rows only": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="sk-bench-ingest-") as tmp:
            d = Path(tmp) / "spool"
            make_spool(d, n)
            t = time.perf_counter()
            recs = [json.loads(p.read_bytes()) for p in sorted(d.glob("*.json"))]
            rates["read + parse files only"].append(n / (time.perf_counter() - t))
            store_path = Path(tmp) / "rows.db"
            store = open_store(str(store_path))
            rows = [tuple(r.get(c) for c in JOB_COLUMNS) for r in recs]
            t = time.perf_counter()
            with store.transaction() as cur:
                cur.executemany(f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES "
                                f"({', '.join('?' for _ in JOB_COLUMNS)})", rows)
            rates["executemany rows only"].append(n / (time.perf_counter() - t))
            store.close()
            with open_store(str(Path(tmp) / "store.db")) as store:
                t = time.perf_counter()
                res = ingest(store, d)
                rates["sk admin ingest (files -> SQLite)"].append(n / (time.perf_counter() - t))
                assert res.ingested == n and res.remaining == 0
                assert store.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == n
            assert sqlite3.connect(store_path).execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == n
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=101, help="hook runs per case")
    ap.add_argument("--records", type=int, default=20_000, help="records per ingest run")
    ap.add_argument("--repeats", type=int, default=5, help="ingest runs")
    args = ap.parse_args()

    print(f"jobcomp hook, wall time per job (n={args.runs} each, interleaved; {os.cpu_count()} CPUs, shared):")
    times = bench_hook(args.runs)
    base = statistics.median(times["python -c pass"])
    for name, ms in times.items():
        print(f"  {name:<36} p50 {statistics.median(ms):6.1f} ms   p99 {pct(ms, 99):6.1f} ms   "
              f"x{statistics.median(ms) / base:4.2f} of python -c pass")
    wrapper = statistics.median(times["jobcomp wrapper, as Slurm runs it"])
    print(f"  goal: wrapper p50 <= 50 ms: {'met' if wrapper <= 50 else 'NOT met'} ({wrapper:.1f} ms)")

    print(f"ingest into SQLite ({args.records} records per run, median of {args.repeats} runs):")
    rates = bench_ingest(args.records, args.repeats)
    full = statistics.median(rates["sk admin ingest (files -> SQLite)"])
    for name, r in rates.items():
        print(f"  {name:<36} {statistics.median(r):9,.0f} records/s   (min {min(r):,.0f}, max {max(r):,.0f})")
    print(f"  goal: >= 5,000 records/s: {'met' if full >= 5000 else 'NOT met'} ({full:,.0f}/s)")


if __name__ == "__main__":
    main()
