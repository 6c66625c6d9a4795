"""Connections and versioned migrations for SQLite and PostgreSQL, behind one small interface."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slurmkit.errors import StoreError

_MIGRATION = re.compile(r"^(\d{4})_.*\.sql$")


@dataclass
class Store:
    """An open store. `paramstyle` is '?' for SQLite and '%s' for PostgreSQL; use `sql()` to write portable SQL."""

    url: str
    dialect: str  # "sqlite" | "postgresql"
    conn: Any

    def sql(self, text: str) -> str:
        """Write queries with '?' placeholders; this turns them into the driver's style."""
        return text if self.dialect == "sqlite" else text.replace("?", "%s")

    def execute(self, text: str, params: tuple | list = ()) -> Any:
        cur = self.conn.cursor()
        cur.execute(self.sql(text), params)
        return cur

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """One write transaction, yielding a cursor: committed when the block ends, rolled back when it raises
        (anything, KeyboardInterrupt too). On SQLite it begins IMMEDIATE, so a second writer waits for the lock
        at the start (busy timeout) instead of failing halfway. Every writer of the store goes through here."""
        if self.dialect == "sqlite":
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn.cursor()
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def end_read(self) -> None:
        """End the transaction a read opened (PostgreSQL opens one for every statement; SQLite in autocommit mode
        holds none), so that a long run does not keep a snapshot or block migrations."""
        if self.dialect == "postgresql":
            self.conn.commit()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def open_store(url: str, *, migrate: bool = True, timeout_s: float = 30.0, create_mode: int = 0o640,
               group: str | None = None) -> Store:
    """Open (and by default migrate) the store at `url`: a SQLite path or a postgresql:// URL.

    A new SQLite file is created with exactly `create_mode` (not world-readable: job records are private) and,
    given `group` (the site's accounting.admin_group), owned by that group, so admins read it and nobody else
    does. SQLite gives its -wal/-shm files the database file's mode and owner.
    """
    try:
        if is_postgres(url):
            try:
                import psycopg
            except ImportError as exc:  # pragma: no cover - depends on the installed extras
                raise StoreError("PostgreSQL store needs psycopg", hint="pip install 'slurmkit[postgres]'") from exc
            conn = psycopg.connect(url, connect_timeout=int(max(1, timeout_s)))
            store = Store(url, "postgresql", conn)
        else:
            path = Path(url).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                gid = _group_id(group) if group else -1
                fd = os.open(path, os.O_CREAT | os.O_WRONLY, create_mode)
                try:
                    os.fchown(fd, -1, gid)
                    os.fchmod(fd, create_mode)  # the umask must not narrow (077) or widen it
                finally:
                    os.close(fd)
            conn = sqlite3.connect(str(path), timeout=timeout_s, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            store = Store(str(path), "sqlite", conn)
    except StoreError:
        raise
    except Exception as exc:
        raise StoreError(f"cannot open the accounting store {url!r}: {exc}") from exc
    if migrate:
        apply_migrations(store)
    return store


def _group_id(name: str) -> int:
    import grp

    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise StoreError(f"the admin group {name!r} (site accounting.admin_group) does not exist",
                         hint=f"create it (groupadd {name}) or name an existing group in the site config") from None


def migrations() -> list[tuple[int, str]]:
    """(version, SQL) for every file in slurmkit/store/migrations, in order."""
    out = []
    for entry in resources.files("slurmkit.store").joinpath("migrations").iterdir():
        m = _MIGRATION.match(entry.name)
        if m:
            out.append((int(m.group(1)), entry.read_text()))
    return sorted(out)


def current_version(store: Store) -> int:
    try:
        row = store.execute("SELECT MAX(version) FROM schema_version").fetchone()
    except Exception:
        store.conn.rollback()  # PostgreSQL: the failed statement aborted the transaction; SQLite: nothing open
        return 0
    return int(row[0] or 0)


# pg_advisory_xact_lock key of the migrations: several `sk admin ingest` creating one new store at once apply each
# migration once (the others wait for the lock, then find it applied).
_MIGRATION_LOCK = 0x736B6D6967  # "skmig"


def apply_migrations(store: Store, upto: int | None = None) -> int:
    """Apply the migrations newer than the store's version (up to version `upto`: a store as an older slurmkit
    left it, for tests of a migration), each in one transaction. Returns the new version.

    Under a lock, so concurrent openers of a new store never race: each migration's transaction takes the
    store's write lock first (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock) and re-reads the version
    inside it, skipping a migration another process applied meanwhile."""
    version = current_version(store)
    for number, sql in migrations():
        if number <= version or (upto is not None and number > upto):
            continue
        try:
            with store.transaction() as cur:
                if store.dialect == "postgresql":
                    cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                if _locked_version(store, cur) < number:
                    for stmt in _statements(sql):
                        cur.execute(stmt)
                    cur.execute(store.sql("INSERT INTO schema_version (version, applied_at) VALUES (?, ?)"),
                                (number, int(time.time())))
        except Exception as exc:
            raise StoreError(f"migration {number:04d} failed on {store.url}: {exc}") from exc
        version = number
    return version


def _locked_version(store: Store, cur: Any) -> int:
    """The store's version read inside the migration's transaction (0 before schema_version exists), without a
    failing statement (one would abort a PostgreSQL transaction)."""
    if store.dialect == "sqlite":
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'")
    else:
        cur.execute("SELECT to_regclass('schema_version') IS NOT NULL WHERE to_regclass('schema_version') "
                    "IS NOT NULL")
    if cur.fetchone() is None:
        return 0
    cur.execute("SELECT MAX(version) FROM schema_version")
    row = cur.fetchone()
    return int(row[0] or 0)


def _statements(sql: str) -> list[str]:
    """Split a migration into statements (comments removed first; migrations hold no ';' inside strings)."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return [s.strip() for s in code.split(";") if s.strip()]
