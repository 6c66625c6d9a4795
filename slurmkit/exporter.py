"""`sk admin exporter`: slurmkit's figures for Prometheus, where sites already look (Grafana next to DCGM).

Two collectors, served by prometheus-client on one port (either or both):

* node (on each GPU node): the live per-job, per-GPU figures of the samplers running on this host, read from
  their state directories (slurmkit/accounting/sampler.py: meta.json and the appended samples.jsonl), so the
  exporter never opens a GPU itself and shows exactly what the job's record will be made of. Only runs whose
  sampler is alive are exported: a job that ended drops out at the next scrape. A summary-only source (DCGM)
  has no live readings; its GPUs appear in `slurmkit_job_gpu_info` alone, which is also the series to join DCGM
  exporter metrics on (docs/monitoring.md).
* store (on the controller or an admin host): GPU-hours allocated, measured, used and wasted by account and
  partition over the whole store, computed by the same code as `sk report usage` (report/build.py), plus jobs
  with idle GPUs in the last 24 hours, the last ingest and the spool backlog. Recomputed at most every
  `refresh_s` (a large store's aggregate takes seconds; scrapes in between get the last result).

Every GPU series carries `source`: figures from the simulated source (the devcluster's pretend GPUs) say so in
their label, never passing as measurements.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from slurmkit.accounting import sampler
from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.store.jobs import last_ingest

PREFIX = "slurmkit"
# `jobid`, not `job`: Prometheus gives every series its scrape job's name as `job` and would rename ours.
GPU_LABELS = ("cluster", "jobid", "run", "user", "account", "partition", "node", "gpu", "uuid", "source")
MIB = 1024 * 1024


# ------------------------------------------------------------------ node: the live samplers


@dataclass
class _Run:
    """What the exporter has read so far of one run's samples.jsonl (read on from `offset` at each scrape)."""

    inode: int
    offset: int = 0
    last_t: list[float | None] = field(default_factory=list)
    last: list[list | None] = field(default_factory=list)
    idle_s: list[float] = field(default_factory=list)
    sample_t: float | None = None


class NodeCollector(Collector):
    """The live figures of every running sampler under `state_dir` (all node subdirectories: two slurmd on one
    host, as on the devcluster, each have theirs). `node` limits it to one node's directory."""

    def __init__(self, state_dir: str, node: str | None = None, idle_pct: float = IDLE_UTIL_PCT) -> None:
        self.state_dir, self.node, self.idle_pct = state_dir, node, idle_pct
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()

    def _read_on(self, path: str, meta: dict) -> _Run | None:
        """Read the lines appended since the last scrape; accumulate idle seconds with gpusummary's weighting
        (a reading stands for the time since the previous one, the first for one interval)."""
        samples = os.path.join(path, sampler.SAMPLES)
        try:
            st = os.stat(samples)
        except OSError:
            return self._runs.get(path)
        n = len(meta.get("gpus") or [])
        run = self._runs.get(path)
        if run is None or run.inode != st.st_ino or st.st_size < run.offset:
            run = _Run(st.st_ino, 0, [None] * n, [None] * n, [0.0] * n)
            self._runs[path] = run
        interval = float(meta.get("interval_s") or sampler.DEFAULT_INTERVAL_S)
        with open(samples, "rb") as fh:
            fh.seek(run.offset)
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # a line being written: read it next time
                run.offset += len(raw)
                try:
                    line = json.loads(raw)
                    t, readings = float(line["t"]), line["g"]
                except (ValueError, KeyError, TypeError):
                    continue
                run.sample_t = t
                for i, r in enumerate(readings[:n]):
                    if not isinstance(r, list) or not r or r[0] is None:
                        continue
                    prev = run.last_t[i]
                    weight = interval if prev is None else max(0.0, t - prev)
                    if r[0] < self.idle_pct:
                        run.idle_s[i] += weight
                    run.last_t[i], run.last[i] = t, r
        return run

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(f"{PREFIX}_job_gpu_info", "A GPU allocated to a running job (value 1); join "
                                 "DCGM exporter series on node/uuid", labels=[*GPU_LABELS, "model"])
        util = GaugeMetricFamily(f"{PREFIX}_job_gpu_utilization_percent",
                                 "GPU utilization at the job's last reading", labels=GPU_LABELS)
        mem = GaugeMetricFamily(f"{PREFIX}_job_gpu_memory_used_bytes", "GPU memory used at the last reading",
                                labels=GPU_LABELS)
        mem_total = GaugeMetricFamily(f"{PREFIX}_job_gpu_memory_total_bytes", "The GPU's memory",
                                      labels=GPU_LABELS)
        power = GaugeMetricFamily(f"{PREFIX}_job_gpu_power_watts", "GPU power draw at the last reading",
                                  labels=GPU_LABELS)
        idle = CounterMetricFamily(f"{PREFIX}_job_gpu_idle_seconds",
                                   f"Seconds of the job so far with GPU utilization below {self.idle_pct:g} %",
                                   labels=GPU_LABELS)
        last = GaugeMetricFamily(f"{PREFIX}_job_gpu_last_sample_timestamp_seconds",
                                 "When the job's sampler last read this GPU", labels=GPU_LABELS)
        jobs = 0
        with self._lock:
            seen = set()
            for _node, _name, path in sampler.run_dirs(self.state_dir, node=self.node):
                if not sampler.alive(path):
                    continue  # ended (or not started yet): nothing live to show
                meta = _meta(path)
                if not meta or not meta.get("gpus"):
                    continue
                seen.add(path)
                jobs += 1
                run = self._read_on(path, meta)
                labels = meta.get("labels") or {}
                for i, gpu in enumerate(meta["gpus"]):
                    values = [str(meta.get("cluster") or ""), str(meta.get("job_id")), str(meta.get("run", 0)),
                              labels.get("user", ""), labels.get("account", ""), labels.get("partition", ""),
                              str(meta.get("node") or ""), str(gpu.get("index")), str(gpu.get("uuid") or ""),
                              str(meta.get("source") or "")]
                    info.add_metric([*values, str(gpu.get("model") or "")], 1)
                    if gpu.get("mem_total_mib") is not None:
                        mem_total.add_metric(values, float(gpu["mem_total_mib"]) * MIB)
                    if run is None or i >= len(run.last):
                        continue
                    r = run.last[i]
                    if r is None:
                        continue
                    util.add_metric(values, float(r[0]))
                    if len(r) > 1 and r[1] is not None:
                        mem.add_metric(values, float(r[1]) * MIB)
                    if len(r) > 2 and r[2] is not None:
                        power.add_metric(values, float(r[2]))
                    idle.add_metric(values, run.idle_s[i])
                    if run.last_t[i] is not None:
                        last.add_metric(values, float(run.last_t[i]))  # type: ignore[arg-type]
            for gone in set(self._runs) - seen:
                del self._runs[gone]
        running = GaugeMetricFamily(f"{PREFIX}_node_sampled_jobs", "Job runs with a live GPU sampler on this host")
        running.add_metric([], jobs)
        yield from (info, util, mem, mem_total, power, idle, last, running)


def _meta(path: str) -> dict | None:
    try:
        with open(os.path.join(path, sampler.META), "rb") as fh:
            meta = json.loads(fh.read())
    except (OSError, ValueError):
        return None  # not written yet (the sampler is opening its source) or torn: next scrape
    return meta if isinstance(meta, dict) else None


# ------------------------------------------------------------------ store: the accounting figures

#: Store series: (metric suffix, report column, help). The report's own columns, so the figures are its figures.
STORE_SERIES = (
    ("gpu_hours_allocated", "gpu_hours", "GPU-hours allocated (all ended job runs in the store)"),
    ("gpu_hours_measured", "gpu_hours_measured", "GPU-hours with GPU metrics"),
    ("gpu_hours_used", "gpu_hours_used", "GPU-hours weighted by utilization (measured GPUs)"),
    ("gpu_hours_wasted", "gpu_hours_wasted", "GPU-hours idle (utilization below the idle threshold)"),
    ("jobs", "jobs", "Ended job runs with GPUs"),
)


class StoreCollector(Collector):
    """The store's GPU-hours by account and partition (since the store began), and its freshness."""

    def __init__(self, store_url: str, site_path: str | None, spool_dir: str | None, refresh_s: float = 300.0,
                 idle_window_s: int = 86400) -> None:
        self.store_url, self.site_path, self.spool_dir = store_url, site_path, spool_dir
        self.refresh_s, self.idle_window_s = refresh_s, idle_window_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            now = time.time()
            if self._cached is None or now - self._cached[0] >= self.refresh_s:
                self._cached = (now, self._compute(now))
            families = self._cached[1]
        yield from families
        if self.spool_dir:
            backlog = GaugeMetricFamily(f"{PREFIX}_spool_backlog_records",
                                        "Hook records waiting in the spool for `sk admin ingest`")
            backlog.add_metric([], spool_backlog(self.spool_dir))
            yield backlog

    def _compute(self, now: float) -> list[Metric]:
        up = GaugeMetricFamily(f"{PREFIX}_store_up", "1 when the last store read succeeded")
        took = GaugeMetricFamily(f"{PREFIX}_store_read_seconds", "How long the last store read took")
        at = GaugeMetricFamily(f"{PREFIX}_store_read_timestamp_seconds", "When the store was last read")
        start = time.monotonic()
        try:
            families = store_families(self.store_url, self.site_path, int(now), self.idle_window_s)
            up.add_metric([], 1)
        except Exception as exc:  # a store that fails must not take the node figures down with it
            import sys

            print(f"sk admin exporter: reading the store {self.store_url} failed: {exc}", file=sys.stderr)
            families = []
            up.add_metric([], 0)
        took.add_metric([], round(time.monotonic() - start, 3))
        at.add_metric([], now)
        return [*families, up, took, at]


def store_families(store_url: str, site_path: str | None, now: int, idle_window_s: int) -> list[Metric]:
    """The store series, from the `sk report usage --by account,partition` figures over [0, now)."""
    from datetime import timezone

    from slurmkit.errors import StoreError
    from slurmkit.report import build as report_build
    from slurmkit.report import query
    from slurmkit.report.access import open_for_reports
    from slurmkit.report.window import Window

    store, scope, admin_group = open_for_reports(store_url, site_path)
    if not scope.everyone:
        raise StoreError(f"the exporter reads the whole store, and {scope.user} may see only their own jobs in it",
                         hint=f"run it as root or as a member of {admin_group!r}")
    with store:
        keys = ["account", "partition"]
        report = report_build.build("usage", store, Window(0, now, timezone.utc, "UTC"), keys, None, scope)
        out: list[Metric] = []
        for suffix, column, text in STORE_SERIES:
            fam = CounterMetricFamily(f"{PREFIX}_{suffix}", text, labels=keys)
            for row in report.table.itertuples(index=False):
                value = getattr(row, column)
                if value == value and value is not None:  # NaN: not measured, no sample (never 0)
                    fam.add_metric([str(getattr(row, k) or "") for k in keys], float(value))
            out.append(fam)
        recent = Window(now - idle_window_s, now, timezone.utc, "UTC")
        idle_jobs = query.run_idle_jobs(store, recent, scope, limit=1_000_000)
        fam = GaugeMetricFamily(f"{PREFIX}_jobs_with_idle_gpus",
                                f"Multi-GPU job runs of the last {idle_window_s // 3600} h with GPUs idle while "
                                "others worked (sk report idle)")
        fam.add_metric([], len(idle_jobs))
        out.append(fam)
        last = last_ingest(store)
        if last is not None:
            fam = GaugeMetricFamily(f"{PREFIX}_store_last_ingest_timestamp_seconds",
                                    "When `sk admin ingest` (or reconcile) last stored a job run")
            fam.add_metric([], float(last))
            out.append(fam)
    return out


def spool_backlog(spool_dir: str) -> int:
    """Records waiting in the spool (`*.json`, as ingest reads them; temporary dot files are not counted)."""
    try:
        with os.scandir(spool_dir) as it:
            return sum(1 for e in it if e.name.endswith(".json") and not e.name.startswith(".")
                       and e.is_file(follow_symlinks=False))
    except OSError:
        return 0


def serve(collectors: list[Collector], address: str, port: int) -> Any:
    """Start the HTTP server (a daemon thread) on a registry holding only slurmkit's collectors."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return start_http_server(port, addr=address, registry=registry), registry


def exposition(collectors: list[Collector]) -> str:
    """One scrape, as text (`sk admin exporter --once`, e.g. for node_exporter's textfile collector)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    return generate_latest(registry).decode()
