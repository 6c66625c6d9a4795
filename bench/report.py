"""`sk report usage --by user,month` and `--by user,day` (UTC and Europe/Berlin) over a year of 1M and 10M
synthetic job records (bench/synth.py): the rollup path (slurmkit/store/rollup.py, slurmkit/report/query.py)
against the full query (every job run computed in the database) and, by month, the naive path (every row into
pandas, then groupby), side by side, in the same run. Checks that all give the same numbers.

Each measurement is a fresh child process (interpreter, imports, opening the store, the report): wall time
around the child, and its peak RSS from os.wait4's rusage. Medians over --runs (--runs-large for sizes over
2M). Goals: by month 1M <= 2 s and 10M <= 20 s (issue 5), by day 10M <= 10 s in UTC and Europe/Berlin
(issue 15), peak memory <= 2 GB. The store's rollup keeps Europe/Berlin's local days (synth.py registers the
zone, as `sk admin rebuild-rollup --zone` does).

Generated stores are cached under /tmp, keyed by size, seed and a hash of synth.py and the store migrations,
so only the first run pays for generating (about 6 min for 10M on 2 cores).

    .venv/bin/python bench/report.py                       # 1M and 10M
    .venv/bin/python bench/report.py --sizes 100000 --runs 3
    .venv/bin/python bench/report.py --sizes 1000000 --pg "$(contrib/devcluster/pg-up)"   # + PostgreSQL
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from slurmkit.record import SOURCE_NAMES  # noqa: E402

SINCE, UNTIL = "2025-12-01", "2026-12-01"  # synth.py's year: 12 months
GOALS_S = {1_000_000: 1.0, 10_000_000: 20.0}  # by month: issue 15 (1M), issue 12 (10M)
GOAL_RSS_MIB = 2048
# The naive child reads every row; past this address-space limit it fails with MemoryError rather than push
# the shared machine into the OOM killer.
NAIVE_AS_LIMIT = 14 * 2**30
FIGURES = ["jobs", "gpu_hours", "gpu_hours_measured", "gpu_hours_used", "gpu_hours_wasted", "idle_gpus_in_multi",
           "idle_gpu_hours_in_multi", "jobs_no_metrics", "wait_s_sum", "wait_n", "wait_s_max",
           *(f"n_{s}" for s in SOURCE_NAMES)]


def cached_store(n_jobs: int, seed: int = 1) -> Path:
    """The synthetic store for (n_jobs, seed), generated once and kept in /tmp."""
    h = hashlib.sha256((ROOT / "bench" / "synth.py").read_bytes())
    for mig in sorted((ROOT / "slurmkit" / "store" / "migrations").glob("*.sql")):
        h.update(mig.read_bytes())
    path = Path(tempfile.gettempdir()) / f"sk-bench-report-{n_jobs}-s{seed}-{h.hexdigest()[:10]}.db"
    if not path.exists():
        from bench import synth

        print(f"generating {n_jobs:,} job records into {path} (cached for later runs) ...", flush=True)
        r = synth.generate(path, n_jobs, seed)
        print(f"  {r['jobs']:,} job runs, {r['gpu_rows']:,} GPU rows, {r['bytes'] / 2**20:,.0f} MiB, "
              f"{r['seconds']:.0f} s (the rollup's rebuild: {r['rollup_seconds']:.0f} s)", flush=True)
    return path


def cached_pg(n_jobs: int, pg_url: str) -> str:
    """The same store copied into a PostgreSQL schema (once, kept: named after the SQLite file's cache key);
    returns a URL whose connections use that schema. sqlite3 -csv | psql \\copy: no row passes through Python."""
    from urllib.parse import quote

    import psycopg

    from slurmkit.store.db import open_store

    db = cached_store(n_jobs)
    schema = "sk_bench_" + db.stem.removeprefix("sk-bench-report-").replace("-", "_")
    url = pg_url + ("&" if "?" in pg_url else "?") + "options=" + quote(f"-csearch_path={schema}")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        done = conn.execute("SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = "
                            "'bench_loaded'", (schema,)).fetchone()
        if done:
            return url
        print(f"copying {db.name} into PostgreSQL schema {schema} (kept for later runs) ...", flush=True)
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    # the real migrations (whose backfill found no jobs yet: the copy brings the buckets)
    with open_store(url) as store, store.transaction() as cur:
        cur.execute("DELETE FROM rollup_buckets")
    t0 = time.perf_counter()
    for table in ("jobs", "job_gpus", "rollup_buckets", "usage_rollup", "usage_rollup_sources"):
        info = subprocess.run(["sqlite3", str(db), f"PRAGMA table_info({table})"], check=True,
                              capture_output=True, text=True).stdout
        cols = [line.split("|")[1] for line in info.splitlines()]
        dump = subprocess.Popen(["sqlite3", "-csv", str(db), f"SELECT {', '.join(cols)} FROM {table}"],
                                stdout=subprocess.PIPE)
        subprocess.run(["psql", "-q", url, "-c", f"\\copy {table} ({', '.join(cols)}) FROM STDIN CSV"],
                       stdin=dump.stdout, check=True)
        dump.wait()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        conn.execute("CREATE TABLE bench_loaded ()")
    print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
    return url


# ---------------------------------------------------------------- children (one report each, in a fresh process)

def child_sql(db: str, out: str, period: str = "month", tz: str = "UTC", every_run: bool = False) -> None:
    """What `sk report usage --by user,<period> --tz <tz>` does: read-only open, the GROUP BY queries (through
    the usage rollup, or with `every_run` the full query over every job run), figures, text."""
    from slurmkit.report import build as build_mod
    from slurmkit.report.access import open_readonly
    from slurmkit.report.formats import render_text
    from slurmkit.report.query import Scope, run_aggregate
    from slurmkit.report.window import parse_window

    if every_run:
        build_mod.run_aggregate = lambda *a, **k: run_aggregate(*a, **k, every_run=True)
    window = parse_window(SINCE, UNTIL, tz=tz)
    with open_readonly(db, "slurmkit-admin") as store:
        rep = build_mod.build("usage", store, window, ["user"], period, Scope())
    render_text(rep, "table")
    rep.table[["user", "period", *FIGURES]].to_pickle(out)


def child_naive(db: str, out: str, period: str = "month", tz: str = "UTC") -> None:
    """The baseline: every job and GPU row into pandas, then the same figures with merge/groupby."""
    import sqlite3

    import numpy as np
    import pandas as pd

    from slurmkit.record import IDLE_UTIL_PCT
    from slurmkit.report.build import derive
    from slurmkit.report.window import parse_window, periods

    window = parse_window(SINCE, UNTIL, tz=tz)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    jobs = pd.read_sql_query("SELECT cluster, job_id, run, user_name, gpus, submit_time, start_time, end_time "
                             "FROM jobs", conn)
    gpus = pd.read_sql_query("SELECT cluster, job_id, run, util_mean, idle_fraction, source FROM job_gpus", conn)
    key = ["cluster", "job_id", "run"]
    gpus = gpus[gpus["util_mean"].notna()]
    gpus = gpus.assign(idle=gpus["idle_fraction"].fillna(0.0), is_idle=(gpus["util_mean"] < IDLE_UTIL_PCT),
                       **{f"n_{s}": gpus["source"] == s for s in SOURCE_NAMES})
    g = gpus.groupby(key).agg(n_gpu=("util_mean", "size"), util_sum=("util_mean", "sum"), idle_sum=("idle", "sum"),
                              n_idle=("is_idle", "sum"), **{f"n_{s}": (f"n_{s}", "sum") for s in SOURCE_NAMES})
    j = jobs[(jobs["gpus"] > 0) & jobs["start_time"].notna() & jobs["end_time"].notna()
             & (jobs["start_time"] < window.until) & (jobs["end_time"] > window.since)]
    j = j.merge(g, left_on=key, right_index=True, how="left")
    has = j["n_gpu"].notna()
    n_gpu = j["n_gpu"].fillna(0)
    j = j.assign(n_measured=np.minimum(n_gpu, j["gpus"]), no_metrics=(~has).astype(int),
                 idle_multi=np.where((j["gpus"] > 1) & (j["n_idle"] > 0) & (j["n_idle"] < n_gpu), j["n_idle"], 0),
                 wait_s=j["start_time"] - j["submit_time"])
    parts = []
    for label, ps, pe in periods(window, period):
        x = j[(j["start_time"] < pe) & (j["end_time"] > ps)]
        s = np.minimum(x["end_time"], pe) - np.maximum(x["start_time"], ps)
        first = ((x["start_time"] >= ps) | (ps == window.since)).astype(int)
        parts.append(pd.DataFrame({
            "user": x["user_name"].fillna("(none)"), "period": label, "jobs": first,
            "gpu_hours": x["gpus"] * s / 3600, "gpu_hours_measured": x["n_measured"] * s / 3600,
            "gpu_hours_used": x["util_sum"].fillna(0) * s / 360000,
            "gpu_hours_wasted": x["idle_sum"].fillna(0) * s / 3600,
            "idle_gpus_in_multi": first * x["idle_multi"], "idle_gpu_hours_in_multi": x["idle_multi"] * s / 3600,
            "jobs_no_metrics": first * x["no_metrics"], "wait_s_sum": first * x["wait_s"],
            "wait_n": first * x["wait_s"].notna(), "wait_s_max": x["wait_s"].where(first == 1),
            **{f"n_{s_}": first * x[f"n_{s_}"].fillna(0) for s_ in SOURCE_NAMES}}))
    agg = {c: "sum" for c in FIGURES}
    agg["wait_s_max"] = "max"
    table = pd.concat(parts).groupby(["user", "period"], as_index=False).agg(agg)
    derive(table).to_pickle(out)  # the report's ratios and "unknown, never 0" rule, as on the SQL path


# ---------------------------------------------------------------- parent

# (period, zone) of the reports measured, all `--by user`: the month one also against the pandas baseline.
SHAPES = [("month", "UTC"), ("day", "UTC"), ("day", "Europe/Berlin")]
GOALS_DAY_S = 10.0  # issue 15: a year by user x day on 10M records, UTC and Europe/Berlin


def measure(kind: str, db: Path | str, limit_as: int | None = None,
            shape: tuple[str, str] = SHAPES[0]) -> tuple[float, float, str | None, str]:
    """(wall s, peak RSS MiB, error or None, result pickle) of one child."""
    fd, out = tempfile.mkstemp(suffix=".pkl", prefix=f"sk-bench-{kind}-")
    os.close(fd)

    def limits():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", kind, "--db", str(db), "--out", out,
                             "--period", shape[0], "--tz", shape[1]],
                            stderr=subprocess.PIPE, text=True, preexec_fn=limits)
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    error = None
    if proc.returncode != 0:
        error = "MemoryError" if "MemoryError" in err else f"exit {proc.returncode}: {err.strip()[-300:]}"
    return wall, usage.ru_maxrss / 1024, error, out


def same_numbers(a_pkl: str, b_pkl: str) -> str:
    import pandas as pd

    a = pd.read_pickle(a_pkl).sort_values(["user", "period"]).reset_index(drop=True)
    b = pd.read_pickle(b_pkl).sort_values(["user", "period"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[["user", "period", *FIGURES]], b[["user", "period", *FIGURES]],
                                  check_dtype=False, rtol=1e-9)
    return f"{len(a):,} rows x {len(FIGURES)} figures equal (rtol 1e-9)"


def _runs(kind: str, target: Path | str, runs: int, limit_as: int | None = None,
          shape: tuple[str, str] = SHAPES[0]) -> tuple[dict, list[str]]:
    """Median wall time, max peak RSS and the first error of `runs` children; plus their result files."""
    rs = [measure(kind, target, limit_as, shape) for _ in range(runs)]
    return ({"s": statistics.median(r[0] for r in rs), "rss": max(r[1] for r in rs),
             "error": next((r[2] for r in rs if r[2]), None)}, [r[3] for r in rs])


def bench_shape(n: int, shape: tuple[str, str], runs: int, full_runs: int, naive_runs: int,
                pg_url: str | None = None) -> dict:
    """One report shape: the rollup path, then (same run) the full query over every job run, the pandas baseline
    (month only) and PostgreSQL, each checked for the same numbers as the rollup path."""
    db = cached_store(n)
    # one untimed run first: the OS page cache then holds the store for both paths alike
    measure("sql", db, shape=shape)
    sql, sql_out = _runs("sql", db, runs, shape=shape)
    res = {"n": n, "shape": shape, "runs": runs, **{f"sql_{k}": v for k, v in sql.items()}}
    outs = list(sql_out)
    others = []
    if full_runs:
        others.append(("full", full_runs, *_runs("full", db, full_runs, shape=shape)))
    if pg_url:
        url = cached_pg(n, pg_url)
        measure("sql", url, shape=shape)  # untimed: PostgreSQL's shared buffers / the OS cache warm
        others.append(("pg", runs, *_runs("sql", url, runs, shape=shape)))
    if naive_runs and shape[0] == "month":
        others.append(("naive", naive_runs, *_runs("naive", db, naive_runs, NAIVE_AS_LIMIT, shape=shape)))
    for name, k, figures, out in others:
        res.update({f"{name}_{key}": v for key, v in figures.items()}, **{f"{name}_runs": k})
        if not sql["error"] and not figures["error"]:
            res[f"{name}_check"] = same_numbers(sql_out[-1], out[-1])
        outs += out
    for path in outs:
        os.unlink(path)
    return res


def report(res: dict) -> None:
    n, (period, tz) = res["n"], res["shape"]
    goal = GOALS_S.get(n) if period == "month" else GOALS_DAY_S if n >= 10_000_000 else None
    verdict = "" if goal is None else f" (goal <= {goal:g} s: {'met' if res['sql_s'] <= goal else 'MISSED'})"
    print(f"\n{n:,} job records, usage by user x {period} in {tz}, a year, median of {res['runs']} fresh processes:")
    print(f"  rollup path (SQLite)        {res['sql_s']:7.2f} s{verdict}, peak RSS {res['sql_rss']:,.0f} MiB "
          f"(goal <= {GOAL_RSS_MIB:,}: {'met' if res['sql_rss'] <= GOAL_RSS_MIB else 'MISSED'})")
    if res.get("sql_error"):
        print(f"    FAILED: {res['sql_error']}")
    labels = {"full": "full query (every run)", "pg": "rollup path on PostgreSQL", "naive": "naive (rows -> pandas)"}
    for name, label in labels.items():
        if f"{name}_s" not in res:
            continue
        if res.get(f"{name}_error"):
            print(f"  {label:<27} failed: {res[f'{name}_error']}, peak RSS {res[f'{name}_rss']:,.0f} MiB")
            continue
        client = " (client; server not counted)" if name == "pg" else ""
        print(f"  {label:<27} {res[f'{name}_s']:7.2f} s, peak RSS {res[f'{name}_rss']:,.0f} MiB{client}, median "
              f"of {res[f'{name}_runs']}; {res[f'{name}_s'] / res['sql_s']:.1f}x the rollup path's time")
        if f"{name}_check" in res:
            print(f"    same numbers: {res[f'{name}_check']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,10000000", help="comma-separated job-record counts")
    ap.add_argument("--shapes", default=";".join(f"{p},{z}" for p, z in SHAPES),
                    help="semicolon-separated PERIOD,ZONE report shapes (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per path (sizes up to 2M)")
    ap.add_argument("--runs-large", type=int, default=2, help="timed rollup-path runs for sizes over 2M")
    ap.add_argument("--full-runs-large", type=int, default=1, help="timed full-query runs for sizes over 2M")
    ap.add_argument("--naive-runs-large", type=int, default=1, help="timed naive runs for sizes over 2M")
    ap.add_argument("--no-naive", action="store_true", help="skip the pandas baseline")
    ap.add_argument("--no-full", action="store_true", help="skip the full query (every run computed)")
    ap.add_argument("--pg", metavar="URL", help="also run the SQL path on this PostgreSQL (the store copied into a "
                    "schema of its own, kept), e.g. $(contrib/devcluster/pg-up)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--child", choices=["sql", "full", "naive"], help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--period", default="month", help=argparse.SUPPRESS)
    ap.add_argument("--tz", default="UTC", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        if a.child == "naive":
            child_naive(a.db, a.out, a.period, a.tz)
        else:
            child_sql(a.db, a.out, a.period, a.tz, every_run=a.child == "full")
        return
    print(f"bench/report.py: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start; "
          f"python {sys.version.split()[0]}")
    shapes = [tuple(x.split(",", 1)) for x in a.shapes.split(";") if x]
    results = []
    for n in (int(s) for s in a.sizes.split(",")):
        large = n > 2_000_000
        for shape in shapes:
            naive_runs = 0 if a.no_naive else a.naive_runs_large if large else a.runs
            full_runs = 0 if a.no_full else a.full_runs_large if large else a.runs
            res = bench_shape(n, shape, a.runs_large if large else a.runs, full_runs, naive_runs, a.pg)
            report(res)
            results.append(res)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
