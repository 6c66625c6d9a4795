"""The per-job GPU sampler: started detached by `sk hook prolog`, stopped by `sk hook epilog`.

Why detached: Slurm waits for the Prolog before it starts the job, so the prolog double-forks (setsid between
the forks) and returns as soon as the sampler's pid file is written; the sampler then opens the metric source
(NVML start-up can take seconds) on its own time. Why a file per job: the samples must outlive the sampler. Each
reading is one appended JSON line, so a sampler that crashes or is killed loses at most the reading it was
writing, and the epilog summarizes whatever is on disk.

State (node-local), one directory per job run and node, so two slurmd on one host never share it:
``$SK_STATE_DIR/<SLURMD_NODENAME>/<cluster>-<job id>-<run>/`` with ``sampler.pid`` ("pid starttime", so a
recycled pid is never signalled), ``meta.json`` (the GPUs as resolved), ``samples.jsonl``, ``sampler.err`` (why
no source could be opened) and ``sampler.log`` (the sampler's own stderr). A directory last written before the
host booted belongs to a job that died with the node; the next prolog claims and delivers it (claim_orphans).

Configuration comes from the environment the hook wrapper exports (the hooks never read the YAML site config):
SK_STATE_DIR, SK_SAMPLE_INTERVAL (accounting.sample_interval_s), SK_METRIC_SOURCE (accounting.metric_source),
SK_SIM_TRACE (accounting.simulated_trace), SK_GPU_MAP (see metrics/nvml.py), SK_TRANSPORT
(accounting.transport), SK_SPOOL (accounting.spool_dir), SK_SAMPLER_MAX_S (a sampler whose epilog never came
stops after this long).
"""

from __future__ import annotations

import json
import os
import sys
import time

from slurmkit.record import MAX_GPUS

# The prolog path imports neither pathlib nor dataclasses (~20 ms of every job start); paths are str.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from slurmkit.accounting.metrics import MetricSource

DEFAULT_STATE_DIR = "/var/lib/slurmkit/sampler"
DEFAULT_SPOOL = "/var/spool/slurmkit"
DEFAULT_INTERVAL_S = 10.0
DEFAULT_MAX_S = 30 * 86400
PID, META, SAMPLES, ERROR, LOG = "sampler.pid", "meta.json", "samples.jsonl", "sampler.err", "sampler.log"


def _float_env(env: dict[str, str], key: str, default: float, problems: list[str]) -> float:
    raw = env.get(key)
    if raw in (None, ""):
        return default
    try:
        value = float(raw)
        if value > 0:
            return value
    except ValueError:
        pass
    problems.append(f"{key}={raw!r} is not a positive number; using {default:g}")
    return default


class NodeConfig:
    """The node hooks' settings, from the environment (see the module docstring). `problems` are logged by the
    hook; defaults are used instead of the bad values."""

    def __init__(self, *, state_dir: str, spool_dir: str, interval_s: float, source: str, trace: str | None,
                 gpu_map: str | None, transport: str, max_s: float, problems: list[str]) -> None:
        self.state_dir, self.spool_dir, self.interval_s, self.source = state_dir, spool_dir, interval_s, source
        self.trace, self.gpu_map, self.transport, self.max_s = trace, gpu_map, transport, max_s
        self.problems = problems

    @classmethod
    def from_env(cls, env: dict[str, str]) -> NodeConfig:
        from slurmkit.record import TRANSPORTS

        problems: list[str] = []
        transport = env.get("SK_TRANSPORT") or "spool"
        if transport not in TRANSPORTS:
            problems.append(f"SK_TRANSPORT={transport!r} is not one of {', '.join(TRANSPORTS)}; using spool")
            transport = "spool"
        return cls(state_dir=env.get("SK_STATE_DIR") or DEFAULT_STATE_DIR,
                   spool_dir=env.get("SK_SPOOL") or DEFAULT_SPOOL,
                   interval_s=_float_env(env, "SK_SAMPLE_INTERVAL", DEFAULT_INTERVAL_S, problems),
                   source=env.get("SK_METRIC_SOURCE") or "auto", trace=env.get("SK_SIM_TRACE") or None,
                   gpu_map=env.get("SK_GPU_MAP") or None, transport=transport,
                   max_s=_float_env(env, "SK_SAMPLER_MAX_S", DEFAULT_MAX_S, problems), problems=problems)


def parse_gpu_list(text: str | None) -> list[int]:
    """SLURM_JOB_GPUS ("0,1,4" or "0-3,6") -> sorted indices. Raises ValueError on anything else, and on an index
    past the record contract's bound (record.MAX_GPUS): "0-99999999" is refused before it is expanded."""
    out: set[int] = set()
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"SLURM_JOB_GPUS={text[:80]!r}: {part[:40]!r} is not a GPU index")
        top = int(hi) if sep else int(lo)
        if top >= MAX_GPUS or int(lo) > top:
            raise ValueError(f"SLURM_JOB_GPUS={text[:80]!r}: {part[:40]!r} is not a GPU index range within "
                             f"0-{MAX_GPUS - 1}")
        out.update(range(int(lo), top + 1))
    return sorted(out)


def is_name(text: str) -> bool:
    """A node or cluster name as it may become one path component: letters, digits, '-', '_', '.', starting with
    a letter or digit (so never '.', '..' or a path), at most 128 characters. String methods: no `re` on the
    hook path."""
    return 0 < len(text) <= 128 and text[0].isascii() and text[0].isalnum() and all(
        c.isascii() and (c.isalnum() or c in "-_.") for c in text)


class JobRun:
    """The job run as the node hooks see it (Slurm's Prolog/Epilog variables)."""

    def __init__(self, cluster: str, job_id: int, run: int, node: str, gpus: list[int],
                 labels: dict[str, str] | None = None) -> None:
        self.cluster, self.job_id, self.run, self.node, self.gpus = cluster, job_id, run, node, gpus
        #: Who and where (user, account, partition): the exporter's labels for the job's live GPU figures.
        self.labels = labels or {}

    @property
    def key(self) -> str:
        return f"{self.cluster}/{self.job_id}/{self.run}"

    @classmethod
    def from_env(cls, env: dict[str, str]) -> JobRun:
        """Raises ValueError naming the variable that is missing or malformed."""
        job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or ""
        if not job.isdigit():
            raise ValueError(f"SLURM_JOB_ID={job!r} is not a job id; not run by Slurm?")
        # Both become path components under SK_STATE_DIR, in a hook that runs as root: a name or nothing.
        node = env.get("SLURMD_NODENAME") or ""
        if not is_name(node):
            raise ValueError(f"SLURMD_NODENAME={node[:80]!r} is not a node name (letters, digits, '-', '_', '.')")
        cluster = env.get("SLURM_CLUSTER_NAME") or ""
        if cluster and not is_name(cluster):
            raise ValueError(f"SLURM_CLUSTER_NAME={cluster[:80]!r} is not a cluster name (letters, digits, '-', "
                             "'_', '.')")
        restarts = env.get("SLURM_JOB_RESTART_COUNT") or env.get("SLURM_RESTART_COUNT") or "0"
        return cls(cluster=cluster, job_id=int(job),
                   run=int(restarts) if restarts.isdigit() else 0, node=node,
                   gpus=parse_gpu_list(env.get("SLURM_JOB_GPUS")), labels=job_labels(env))


#: meta.json label -> the Prolog variable it comes from (slurmd's prep/script plugin sets all three).
LABEL_VARS = {"user": "SLURM_JOB_USER", "account": "SLURM_JOB_ACCOUNT", "partition": "SLURM_JOB_PARTITION"}


def job_labels(env: dict[str, str]) -> dict[str, str]:
    """The job's user, account and partition from the Prolog's environment; a missing one is absent, and a value
    is cut at 128 characters (a label, not a record: the job's record comes from the controller)."""
    return {k: env[v][:128] for k, v in LABEL_VARS.items() if env.get(v)}


def node_dir(cfg: NodeConfig, node: str) -> str:
    return os.path.join(cfg.state_dir, node)


def job_dir(cfg: NodeConfig, job: JobRun) -> str:
    return os.path.join(node_dir(cfg, job.node), f"{job.cluster}-{job.job_id}-{job.run}")


def job_dirs(cfg: NodeConfig, job: JobRun) -> list[str]:
    """Every run's state of this job on this node. The epilog cannot trust its own SLURM_JOB_RESTART_COUNT:
    after `scontrol requeue` Slurm 22.05 passes the already incremented count to the epilog of the old run."""
    d = node_dir(cfg, job.node)
    prefix = f"{job.cluster}-{job.job_id}-"
    try:
        names = [n for n in os.listdir(d) if n.startswith(prefix) and n[len(prefix):].isdigit()]
    except OSError:
        return []
    return [os.path.join(d, n) for n in sorted(names, key=lambda n: int(n[len(prefix):]))]


def _names(path: str, notes: list[str] | None, what: str) -> list[str]:
    """The directory's entries without dot names, sorted; none (and a note) when it cannot be read."""
    try:
        return sorted(n for n in os.listdir(path) if not n.startswith("."))
    except OSError as exc:
        if notes is not None:
            notes.append(f"cannot read {what}{path}: {exc.strerror}")
        return []


def run_dirs(state_dir: str, notes: list[str] | None = None, node: str | None = None):
    """(node, run directory name, path) of every job run under `state_dir` (<node>/<cluster>-<job>-<run>/), all
    nodes' (two slurmd on one host have one subdirectory each) or `node`'s. Dot names (claimed orphans,
    temporary files) are left out; what cannot be read is appended to `notes`."""
    for n in [node] if node else _names(state_dir, notes, "the sampler state directory "):
        node_path = os.path.join(state_dir, n)
        if not os.path.isdir(node_path):
            continue
        for name in _names(node_path, notes, ""):
            path = os.path.join(node_path, name)
            if os.path.isdir(path):
                yield n, name, path


def run_of(path: str) -> int:
    return parse_run_name(os.path.basename(path))[2]


# ------------------------------------------------------------------ process identity


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _proc_start(pid: int) -> str | None:
    """The process's start time (clock ticks since boot) or None when it is gone or a zombie."""
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _read_pid(d: str) -> tuple[int, str] | None:
    try:
        pid, start = _read(os.path.join(d, PID)).split()
        return int(pid), start
    except (OSError, ValueError):
        return None


def _write_atomic(path: str, text: str) -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}")
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def alive(d: str) -> bool:
    got = _read_pid(d)
    return bool(got) and _proc_start(got[0]) == got[1]  # type: ignore[index]


# ------------------------------------------------------------------ prolog side


def start_detached(cfg: NodeConfig, job: JobRun) -> str:
    """Create the job's state directory and start the sampler in its own session. Returns when the pid file
    exists (a few milliseconds); the sampler itself never returns here."""
    d = job_dir(cfg, job)
    os.makedirs(d, mode=0o750, exist_ok=True)
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return d
    # First child: new session (no controlling terminal, not in slurmd's process group), fork again, record
    # the sampler's pid and start time, exit so the sampler is re-parented and never becomes our zombie.
    try:
        os.setsid()
        grandchild = os.fork()
        if grandchild:
            start = None
            for _ in range(200):
                start = _proc_start(grandchild)
                if start:
                    break
                time.sleep(0.001)
            _write_atomic(os.path.join(d, PID), f"{grandchild} {start}\n")
            os._exit(0)
        _become_daemon(d)
        code = run(cfg, job, d)
    except BaseException:  # a forked child must never return into the hook
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)


def _become_daemon(d: str) -> None:
    os.chdir("/")
    os.umask(0o027)
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(os.path.join(d, LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 65536)  # Slurm's and the wrapper's descriptors (a pipe held open would stall them)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


# ------------------------------------------------------------------ the sampler


def _wanted(d: str) -> bool:
    """The epilog removes the job directory when done: a sampler whose directory or pid file is gone (or
    names another process) has no job any more."""
    got = _read_pid(d)
    return os.path.isdir(d) and (got is None or got[0] == os.getpid())


def run(cfg: NodeConfig, job: JobRun, d: str) -> int:
    """Open the source, write meta.json, then append one line per reading until SIGTERM (from the epilog)."""
    import signal

    from slurmkit.accounting.metrics import SourceUnavailable, open_source, parse_gpu_map

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        src = open_source(cfg.source, key=job.key, node=job.node, interval_s=cfg.interval_s, trace=cfg.trace,
                          gpu_map=parse_gpu_map(cfg.gpu_map))
        gpus = src.open(job.gpus)
    except (SourceUnavailable, ValueError) as exc:
        _write_atomic(os.path.join(d, ERROR), f"{exc}\n")
        return 0
    meta = {"version": 1, "cluster": job.cluster, "job_id": job.job_id, "run": job.run, "node": job.node,
            "source": src.name, "interval_s": cfg.interval_s, "started": time.time(), "labels": job.labels,
            "gpus": [g.as_dict() for g in gpus]}
    summary_only = getattr(src, "summary_only", False)  # DCGM: the host engine records; nothing to sample
    if summary_only:
        meta["recording"] = src.recording()  # type: ignore[attr-defined]
    _write_atomic(os.path.join(d, META), json.dumps(meta) + "\n")
    fd = None if summary_only else os.open(os.path.join(d, SAMPLES), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    deadline = time.monotonic() + cfg.max_s
    next_t = time.monotonic()
    try:
        while True:
            if fd is not None:
                _append(fd, src)
            next_t += cfg.interval_s
            now = time.monotonic()
            if next_t < now:  # starved of CPU: skip the missed readings, keep the cadence
                next_t = now + cfg.interval_s - (now - next_t) % cfg.interval_s
            if signal.sigtimedwait({signal.SIGTERM, signal.SIGINT}, max(0.0, next_t - now)) is not None:
                if fd is not None:
                    _append(fd, src)  # the final reading, at the job's end
                break
            if not _wanted(d) or time.monotonic() > deadline:
                break
    finally:
        if fd is not None:
            os.close(fd)
        src.close()
    return 0


def _append(fd: int, src: MetricSource) -> None:
    readings = src.sample()
    line = json.dumps({"t": round(time.time(), 3), "g": [r.as_list() if r else None for r in readings]},
                      separators=(",", ":"))
    os.write(fd, (line + "\n").encode())  # one write per line, O_APPEND: lines never interleave or tear


# ------------------------------------------------------------------ epilog side


def stop(d: str, timeout_s: float = 5.0) -> str | None:
    """Stop the job's sampler. Returns a flag for the record: None (stopped as asked), 'sampler-died' (it was
    already gone: crashed or killed), 'sampler-killed' (needed SIGKILL), 'no-sampler-pid'."""
    got = _read_pid(d)
    if got is None:
        return "no-sampler-pid"
    import signal

    pid, start = got
    if _proc_start(pid) != start:
        return "sampler-died"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if _proc_start(pid) != start:
            return None
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    return "sampler-killed"


def boot_time() -> float | None:
    """When this host last booted (/proc/stat btime), or None where it cannot be read."""
    try:
        for line in _read("/proc/stat").splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0  # gone meanwhile


def _newest_write(d: str) -> float:
    return max([os.stat(d).st_mtime, *(_mtime(os.path.join(d, name)) for name in os.listdir(d))])


def claim_orphans(cfg: NodeConfig, node: str, booted: float) -> list[tuple[str, str, float]]:
    """Run directories last written before this host booted: no job outlives a reboot, so their jobs died with
    the node and no epilog will come for them. Each is claimed by renaming it to a dot name (two prologs starting
    at once cannot both take it); one whose sampler still runs is never taken. Returns (claimed path, original
    name, time of the last write)."""
    d = node_dir(cfg, node)
    try:
        names = [n for n in os.listdir(d) if not n.startswith(".")]
    except OSError:
        return []
    claimed = []
    for name in names:
        path = os.path.join(d, name)
        try:
            if not os.path.isdir(path) or (last := _newest_write(path)) >= booted or alive(path):
                continue  # alive: a clock stepped forward moves btime, a live sampler proves the job runs
            target = os.path.join(d, f".orphan-{name}")
            os.rename(path, target)
        except OSError:
            continue  # gone meanwhile, or taken by another prolog
        claimed.append((target, name, last))
    return claimed


def parse_run_name(name: str) -> tuple[str, int, int]:
    """(cluster, job id, run) from a run directory's name `<cluster>-<job id>-<run>` (the cluster may hold '-')."""
    cluster, job_id, run = name.rsplit("-", 2)
    return cluster, int(job_id), int(run)


def read_state(d: str) -> tuple[dict | None, list[dict], str | None]:
    """(meta, readings, error) from a job directory. A torn or garbled line (a killed writer) is skipped."""
    try:
        meta = json.loads(_read(os.path.join(d, META)))
    except (OSError, ValueError):
        meta = None
    lines: list[dict] = []
    try:
        with open(os.path.join(d, SAMPLES), "rb") as fh:
            for raw in fh:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(line, dict) and isinstance(line.get("g"), list):
                    lines.append(line)
    except OSError:
        pass
    try:
        error = _read(os.path.join(d, ERROR)).strip() or None
    except OSError:
        error = None
    return meta, lines, error
