"""Who may see what, and opening the store read-only for reports.

Privacy is enforced by the operating system first, by slurmkit second:

* SQLite: the store file is created 0640, owner root (or the slurm user), group = the site's
  accounting.admin_group (the ingest side sets this). Members of that group can read it and see every job;
  anyone else cannot open it and gets a message saying so and pointing to ``--from-sacct``, where Slurm itself
  decides what they may see (PrivateData=jobs) and slurmkit adds ``--user=self``.
* If a non-admin can read a store anyway (their own copy, a PostgreSQL role with SELECT), every query is
  restricted to ``user_name = <their login>``; the report says so.

Admin = the invoking user is root or is a member (primary or supplementary) of admin_group.
"""

from __future__ import annotations

import grp
import os
import pwd
import sqlite3
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
        group = grp.getgrnam(admin_group)
    except KeyError:
        return False
    return group.gr_gid in os.getgroups() or group.gr_gid == os.getgid() or current_user() in group.gr_mem


def scope_for(admin_group: str) -> Scope:
    """Everyone for admins, else only the caller's own jobs."""
    return Scope(None) if is_admin(admin_group) else Scope(current_user())


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
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        conn.execute("SELECT 1 FROM jobs LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read the accounting store {path}: {exc}",
                         hint="a WAL store also needs its -wal/-shm files and directory readable by the group") \
            from exc
    return Store(str(path), "sqlite", conn)
