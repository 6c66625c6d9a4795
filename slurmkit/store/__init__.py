"""The accounting store: SQLite by default, PostgreSQL for sites that keep it on another host.

Only the DB-API connection and the versioned migrations live here; writers (ingest) and readers (reports) use it.
"""

from slurmkit.store.db import Store, open_store

__all__ = ["Store", "open_store"]
