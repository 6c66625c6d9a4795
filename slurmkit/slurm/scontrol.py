"""Parse `scontrol show job -o JOBID` (one line of Key=Value pairs, Slurm 22.05)."""

from __future__ import annotations

import os
import time

_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/:_")


def parse_show_job(text: str) -> dict[str, str]:
    """Keys start a space-separated token (`Key=`, a letter then letters, digits, '/', ':' or '_'); values may
    contain spaces (Command=, WorkDir=), so a token that is not `Key=...` continues the previous value.
    String methods, not a regex: `re` costs the jobcomp hook (python -S) ~6 ms per job."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    out: dict[str, str] = {}
    key = None
    for token in line.split(" "):
        name, eq, value = token.partition("=")
        if eq and name[:1].isalpha() and name.isascii() and _KEY_CHARS.issuperset(name):
            key = name
            out[key] = value
        elif key is not None:
            out[key] += " " + token
    return {k: v.strip() for k, v in out.items()}


def run(argv: list[str], timeout_s: float = 10.0) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `argv`: subprocess.run for the hook path without importing subprocess
    (with its threading/selectors/signal imports that is ~7 ms of every job's jobcomp run). Raises OSError
    when the program cannot be started and TimeoutError (after killing it) when it runs past `timeout_s`."""
    import select

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)])
    except BaseException:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    os.close(out_w)
    os.close(err_w)
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    open_fds = [out_r, err_r]
    deadline = time.monotonic() + timeout_s
    try:
        while open_fds:
            left = deadline - time.monotonic()
            ready = select.select(open_fds, [], [], left)[0] if left > 0 else []
            if not ready:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise TimeoutError(f"{argv[0]} did not answer in {timeout_s:g} s")
            for fd in ready:
                data = os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:
                    open_fds.remove(fd)
    finally:
        os.close(out_r)
        os.close(err_r)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return status, b"".join(chunks[out_r]).decode(errors="replace"), b"".join(chunks[err_r]).decode(errors="replace")


def show_job(job_id: int, timeout_s: float = 10.0) -> dict[str, str]:
    """Raises OSError, TimeoutError or RuntimeError (scontrol failed); the hook catches them and flags the record."""
    status, out, err = run(["scontrol", "show", "job", "-o", str(int(job_id))], timeout_s)
    if status != 0:
        raise RuntimeError(f"scontrol show job {int(job_id)} exited {status}: {err.strip()}")
    return parse_show_job(out)
