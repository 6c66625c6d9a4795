"""Private per-user cache directories (~/.cache/slurmkit/NAME, or under $XDG_CACHE_HOME).

What is cached here is loaded as code or pickles (compiled templates, validated configs), so a directory is used
only if it is the user's own and nobody else can read or write it (0700). Anything that cannot be created or
trusted is simply not used: a cache makes slurmkit faster, never different.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(name: str) -> Path | None:
    """The private cache directory NAME, created if needed; None if it cannot be made or trusted."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "slurmkit", name)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None
    except OSError:
        return None
    return Path(path)
