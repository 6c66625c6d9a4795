"""Durable spool: one JSON file per record, written so that a crash never leaves a half-written record.

Write: temporary file in the same directory, fsync, atomic rename, fsync of the directory. Readers only look at
`*.json`; temporary files start with `.`. Malformed records move to `quarantine/` with a `.reason` file; nothing
is ever deleted except by ingest, after the store committed it.

Root works in a directory that hooks write into, so every name is opened relative to a directory file
descriptor with O_NOFOLLOW (never a path that a link could redirect): a link or a non-regular file as the
lock, a record, the quarantine directory or a .reason file is refused, not followed, and a spool or quarantine
directory that others may write into is refused with UnsafeSpool (see `open_dir`).
"""

from __future__ import annotations

import errno
import os
import stat as _stat

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing or pathlib costs the jobcomp hook ms per job
if TYPE_CHECKING:
    from pathlib import Path

# JSON of a flat record without the json module: `import json` (and the `re` it imports) is ~13 ms of the
# jobcomp hook's ~40 under python -S, paid for every job, one job at a time. The output is byte for byte what
# json.dumps(data, sort_keys=True, separators=(",", ":")) writes (tests/test_jobcomp.py compares them); anything
# but str/int/bool/None values (a node record's GPU list) goes to json.dumps itself.
_ESCAPE = {**{i: f"\\u{i:04x}" for i in (*range(0x20), 0x7F)}, ord("\\"): "\\\\", ord('"'): '\\"', ord("\b"): "\\b",
           ord("\f"): "\\f", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _non_ascii(c: str) -> str:
    o = ord(c)
    if o < 0x80:
        return c
    if o > 0xFFFF:  # a surrogate pair, as json.dumps writes it
        o -= 0x10000
        return f"\\u{0xD800 | (o >> 10):04x}\\u{0xDC00 | (o & 0x3FF):04x}"
    return f"\\u{o:04x}"


def _string(s: str) -> str:
    s = s.translate(_ESCAPE)
    return '"' + (s if s.isascii() else "".join(map(_non_ascii, s))) + '"'


def dumps(data: dict) -> str:
    """`data` as compact JSON with sorted keys (json.dumps for anything not flat)."""
    if not all(type(k) is str and (v is None or type(v) in (str, int, bool)) for k, v in data.items()):
        import json

        return json.dumps(data, sort_keys=True, separators=(",", ":"))
    values = {None: "null", True: "true", False: "false"}
    return "{" + ",".join(
        f"{_string(k)}:{_string(v) if type(v) is str else values[v] if v is None or type(v) is bool else v}"
        for k, v in sorted(data.items())) + "}"


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
QUARANTINE = "quarantine"
LOCK = ".ingest.lock"


class UnsafeSpool(OSError):
    """A spool, lock or quarantine that root must not use: a link, not a directory/regular file, or a directory
    that others may write into. Its message names the path and what to fix."""


def open_dir(path: str | Path, *, create: bool = False, what: str = "spool directory") -> int:
    """A file descriptor of the directory `path` (the last component never a link), checked by `check_dir`."""
    p = os.fspath(path)
    if create:
        os.makedirs(p, exist_ok=True)
    try:
        fd = os.open(p, _DIR)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeSpool(f"{p}: the {what} is a symbolic link or not a directory; refusing to use it") from None
        raise
    try:
        check_dir(fd, p, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_dir(fd: int, path: str, what: str, *, own: bool = False) -> None:
    """Refuse a directory that anyone may write into unless it is root-owned and sticky (like /tmp: nobody can
    remove or rename another's files); with `own`, also one owned by neither root nor this user."""
    st = os.fstat(fd)
    mode = _stat.S_IMODE(st.st_mode)
    if mode & _stat.S_IWOTH and not (mode & _stat.S_ISVTX and st.st_uid == 0):
        raise UnsafeSpool(f"{path}: the {what} is world-writable (mode {mode:04o}) and not a root-owned sticky "
                          f"directory; refusing to use it (chmod o-w {path})")
    if own and st.st_uid not in (0, os.geteuid()):
        raise UnsafeSpool(f"{path}: the {what} is owned by uid {st.st_uid}, neither root nor this user "
                          f"(uid {os.geteuid()}); refusing to use it")


def lock(dir_fd: int, path: str | Path) -> int:
    """The spool's ingest lock (held by ingest and reconcile), opened without following a link and never
    truncated: a file descriptor holding an exclusive flock; close it to release."""
    import fcntl

    try:
        fd = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600,
                     dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise UnsafeSpool(f"{os.path.join(os.fspath(path), LOCK)}: the ingest lock is a symbolic link or "
                              "not a regular file; refusing to use it (remove it)") from None
        raise
    try:
        if not _stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeSpool(f"{os.path.join(os.fspath(path), LOCK)}: the ingest lock is not a regular file; "
                              "refusing to use it (remove it)")
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def names(dir_fd: int) -> list[str]:
    """The record files waiting in a spool directory (names; temporary files start with '.')."""
    return sorted(n for n in os.listdir(dir_fd) if n.endswith(".json") and not n.startswith("."))


def write(spool_dir: str | Path, name: str, data: dict) -> str:
    d = os.fspath(spool_dir)
    os.makedirs(d, exist_ok=True)
    final = f"{name}.json"
    tmp = f".{name}.{os.getpid()}.tmp"
    payload = dumps(data).encode()
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the configured spool may be a link itself
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o640, dir_fd=dfd)
        except FileExistsError:  # left by a killed writer of the same pid (or planted): a name, never followed
            os.unlink(tmp, dir_fd=dfd)
            fd = os.open(tmp, flags, 0o640, dir_fd=dfd)
        try:
            os.write(fd, payload)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return os.path.join(d, final)


def pending(spool_dir: str | Path) -> list[Path]:
    from pathlib import Path

    d = Path(spool_dir)
    if not d.is_dir():
        return []
    fd = open_dir(d)
    try:
        return [d / n for n in names(fd)]
    finally:
        os.close(fd)


MAX_RECORD = 16 << 20  # bytes of one spool file: a node record of thousands of GPUs is far below


class NotARecord(Exception):
    """A spool entry that is not a record file (a link, a FIFO, a directory, too large): quarantined."""


def read(path: str | Path, dir_fd: int | None = None) -> bytes:
    """The bytes of one spool file, never following a link nor blocking on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise NotARecord(f"cannot open it ({exc.strerror}; a symbolic link is never followed)") from None
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            raise NotARecord("not a regular file")
        if st.st_size > MAX_RECORD:
            raise NotARecord(f"{st.st_size} bytes, more than a record can be ({MAX_RECORD})")
        chunks, left = [], MAX_RECORD + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise NotARecord(f"more than a record can be ({MAX_RECORD} bytes)")
        return b"".join(chunks)
    finally:
        os.close(fd)


def quarantine_at(dir_fd: int, name: str, reason: str, spool_dir: str | Path) -> None:
    """Move the spool entry `name` (whatever it is: a link moves as a link) into quarantine/ with a .reason file
    beside it. The quarantine directory and the .reason file are opened without following a link."""
    where = os.path.join(os.fspath(spool_dir), QUARANTINE)
    try:  # noqa: SIM105 - contextlib is not worth its import here (the epilog quarantines too)
        os.mkdir(QUARANTINE, 0o750, dir_fd=dir_fd)
    except FileExistsError:
        pass
    try:
        qfd = os.open(QUARANTINE, _DIR, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeSpool(f"{where}: the quarantine is a symbolic link or not a directory; refusing to use it "
                              "(remove it)") from None
        raise
    try:
        check_dir(qfd, where, "quarantine directory", own=True)
        reason_name = f"{name}.reason"
        try:
            os.unlink(reason_name, dir_fd=qfd)  # an earlier one, or a planted link: the name, never its target
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            raise UnsafeSpool(f"{where}/{reason_name} is a directory; refusing to use it (remove it)") from None
        fd = os.open(reason_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640,
                     dir_fd=qfd)
        try:
            os.write(fd, (reason + "\n").encode("utf-8", "backslashreplace"))
        finally:
            os.close(fd)
        try:
            os.rename(name, name, src_dir_fd=dir_fd, dst_dir_fd=qfd)
        except IsADirectoryError:
            raise UnsafeSpool(f"{where}/{name} is a directory; refusing to use it (remove it)") from None
    finally:
        os.close(qfd)


def quarantine(path: Path, reason: str) -> None:
    """`quarantine_at` for a path (a node's undelivered records)."""
    fd = open_dir(path.parent)
    try:
        quarantine_at(fd, path.name, reason, path.parent)
    finally:
        os.close(fd)
