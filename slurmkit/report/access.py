"""Who may see what, and opening the store read-only for reports.

Privacy is enforced by the operating system first, by slurmkit second:

* SQLite: the store file is created 0640, owner root (or the slurm user), group = the site's
  accounting.admin_group (the ingest side sets this). Members of that group can read it and see every job;
  anyone else cannot open it and gets a message saying so and pointing to ``--from-sacct``, where Slurm itself
  decides what they may see (PrivateData=jobs) and slurmkit adds ``--user=self``.
* If a non-admin can read a store anyway (their own copy, a PostgreSQL role with SELECT), every query is
  restricted to ``user_name = <their login>``; the report says so.

Admin = the invoking user is root, or a member (primary or supplementary) of a group that no user can choose:
for a SQLite store, the group that owns the store file (set by ingest); otherwise the admin_group of a site
config only root can write (owned by root, not writable by group or others). A --site FILE a user wrote naming
their own group makes no one an admin.
"""

from __future__ import annotations

import grp
import os
import pwd
import sqlite3
import stat
import time
from pathlib import Path

from slurmkit.errors import StoreError
from slurmkit.report.query import Scope
from slurmkit.store.db import Store, is_postgres


def current_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def is_admin(admin_group: str) -> bool:
    if os.geteuid() == 0:
        return True
    try:
        return in_group(grp.getgrnam(admin_group).gr_gid)
    except KeyError:
        return False


def in_group(gid: int) -> bool:
    try:
        members = grp.getgrgid(gid).gr_mem
    except KeyError:
        members = []
    return gid in os.getgroups() or gid == os.getgid() or current_user() in members


def trusted(path: str | Path) -> bool:
    """A config file only root can change: its settings may decide who is an admin."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def scope_for(admin_group: str) -> Scope:
    """Everyone for admins, else only the caller's own jobs."""
    return Scope(None) if is_admin(admin_group) else Scope(current_user())


def store_scope(url: str, admin_group: str, config_trusted: bool) -> Scope:
    """Who the caller may see in this store: see the module docstring."""
    if os.geteuid() == 0:
        return Scope(None)
    if not is_postgres(url):
        try:
            gid = os.stat(Path(url).expanduser()).st_gid
        except OSError:
            return Scope(current_user())
        return Scope(None) if in_group(gid) else Scope(current_user())
    return scope_for(admin_group) if config_trusted else Scope(current_user())


def open_for_reports(db: str | None, site_path: str | None) -> tuple[Store, Scope, str]:
    """The store a report reads (--db, else the site's accounting.store), whom the caller may see in it, and the
    admin group named in messages."""
    admin_group, config_trusted = "slurmkit-admin", False
    if db is None or site_path:
        from slurmkit.site.model import find_site_file, load_site

        path = find_site_file(site_path)
        site = load_site(path)
        admin_group, config_trusted = site.accounting.admin_group, trusted(path)
        db = db or site.accounting.store
    store = open_readonly(db, admin_group)
    return store, store_scope(db, admin_group, config_trusted), admin_group


def job_source(db: str | None, site_path: str | None, from_sacct: bool = False) -> tuple[Store | None, Scope]:
    """Where `sk report job` reads: the store when the caller can read it (an admin, or a store they may open),
    else None, meaning Slurm accounting (slurmkit/report/jobstats.py): the job's AdminComment and sacct, where
    an ordinary user's own job always is. `--db` names a store that must be read; `--from-sacct` forces sacct.
    The scope for sacct: everyone only for root or a member of the admin group of a config only root can write."""
    from slurmkit.errors import SiteConfigError
    from slurmkit.site.model import find_site_file, load_site

    if db:
        store, scope, _ = open_for_reports(db, site_path)
        return store, scope
    try:
        path = find_site_file(site_path)
    except SiteConfigError:
        if site_path:
            raise
        path = None  # no site config anywhere: sacct with defaults
    site = load_site(path) if path is not None else None
    admin_group = site.accounting.admin_group if site else "slurmkit-admin"
    sacct_scope = Scope(None) if os.geteuid() == 0 or (path is not None and trusted(path)
                                                       and is_admin(admin_group)) else Scope(current_user())
    url = site.accounting.store if site else None
    if from_sacct or url is None:
        return None, sacct_scope
    if not is_postgres(url):
        file = Path(url).expanduser()
        if not file.exists() or not os.access(file, os.R_OK):
            return None, sacct_scope
    store, scope, _ = open_for_reports(None, site_path)
    return store, scope


def open_readonly(url: str, admin_group: str) -> Store:
    """Open the store for reading, never creating or migrating it (reports must not write)."""
    if is_postgres(url):
        from slurmkit.store.db import open_store

        return open_store(url, migrate=False)
    path = Path(url).expanduser()
    if not path.exists():
        raise StoreError(f"the accounting store {path} does not exist",
                         hint="pass --db PATH|postgresql://..., or set accounting.store in the site config; "
                              "the store is created by `sk admin ingest`")
    if not os.access(path, os.R_OK):
        raise StoreError(
            f"you ({current_user()}) cannot read the accounting store {path}: it is readable only by its owner "
            f"and the admin group {admin_group!r}",
            hint="admins: ask to be added to that group; everyone: `sk report usage --from-sacct` reports your "
                 "own jobs' allocations from Slurm accounting")
    try:
        conn = _tuned(sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None))
        conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchall()
        return Store(str(path), "sqlite", conn)
    except sqlite3.Error as exc:
        if not Path(f"{path}-wal").exists():
            return _open_snapshot(path)
        raise StoreError(f"cannot read the accounting store {path}: {exc}",
                         hint="while a writer holds it, a WAL store's -wal/-shm files must be readable by the "
                              "admin group") from exc


def _file_state(path: Path) -> tuple[int, int, int, bool]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns, Path(f"{path}-wal").exists()


class SnapshotStore(Store):
    """A WAL store read by someone who may not write next to it (an admin-group member, file mode 0640).

    SQLite (3.22+) opens a WAL database read-only only if its -wal and -shm files exist or can be created; once
    the last writer closes they are gone, and a reader without write access to the directory cannot recreate
    them. With no -wal file the main file holds every committed transaction, so it can be read as
    `immutable=1` (no locks, no -shm). A writer may start meanwhile: it changes the main file only when it
    checkpoints, and only while a -wal exists, so every query checks the file is unchanged and no -wal appeared
    between before and after it; otherwise the read is discarded and retried on a fresh snapshot.
    """

    RETRIES = 5

    def execute(self, text: str, params: tuple | list = ()) -> _Rows:
        for _ in range(self.RETRIES):
            before = _file_state(Path(self.url))
            if not before[3]:
                cur = self.conn.cursor()
                cur.execute(text, params)
                rows = cur.fetchall()
                if _file_state(Path(self.url)) == before:
                    return _Rows(cur.description, rows)
            self.conn.close()
            time.sleep(0.2)
            self.conn = _immutable(Path(self.url))
        raise StoreError(f"the accounting store {self.url} kept changing while it was read (an ingest is running)",
                         hint="rerun the report in a moment")


class _Rows:
    """The fetched result of one SnapshotStore query (a cursor's description/fetchone/fetchall)."""

    def __init__(self, description, rows: list) -> None:
        self.description, self._rows = description, rows

    def fetchall(self) -> list:
        rows, self._rows = self._rows, []
        return rows

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None


def _immutable(path: Path) -> sqlite3.Connection:
    return _tuned(sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, isolation_level=None))


def _tuned(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Settings for one big read: a 64 MiB page cache (SQLite's default is 2 MiB). The sorter and automatic
    indexes stay in temporary files beyond it (temp_store=MEMORY took a 10M-job report to 2 GB RSS)."""
    conn.execute("PRAGMA cache_size=-65536")
    return conn


def _open_snapshot(path: Path) -> Store:
    try:
        store = SnapshotStore(str(path), "sqlite", _immutable(path))
        store.execute("SELECT 1 FROM jobs LIMIT 1")
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the accounting store {path}: {exc}") from exc
    return store
