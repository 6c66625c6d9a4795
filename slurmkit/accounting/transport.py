"""How a node's GPU summary leaves the node: the spool (default), the job's AdminComment or both, never lost.

A summary that cannot be delivered (spool unreachable, AdminComment refused) is written durably to the node's
``undelivered/`` directory under the sampler state, and every later epilog on that node tries it again. An
AdminComment failure falls back to the spool, flagged, so ingest still gets it where a spool is reachable.
"""

from __future__ import annotations

import json
import os
import sys
import time

from slurmkit.accounting import spool
from slurmkit.accounting.sampler import NodeConfig, node_dir


def spool_name(rec: dict) -> str:
    return f"gpus-{rec['cluster']}-{rec['job_id']}-{rec['run']}-{rec['node']}-{time.time_ns()}"


def _log(msg: str) -> None:
    print(f"sk hook epilog: {msg}", file=sys.stderr)


def _send(cfg: NodeConfig, rec: dict) -> None:
    """admin_comment: the AdminComment, the spool only when that fails; spool+admin_comment: both (the store keeps
    its spool path, the owner reads the AdminComment through sacct), the spool even when the AdminComment fails."""
    if "admin_comment" in cfg.transport.split("+"):
        from slurmkit.accounting import admin_comment

        try:
            admin_comment.deliver(rec)
            if cfg.transport == "admin_comment":
                return
        except Exception as exc:
            _log(f"job {rec['job_id']}: AdminComment failed ({exc}); writing to the spool instead")
            flags = [f for f in (rec.get("flags") or "").split(",") if f]
            rec = {**rec, "flags": ",".join([*flags, "admin-comment-failed"])}
    spool.write(cfg.spool_dir, spool_name(rec), rec)


def deliver(cfg: NodeConfig, rec: dict) -> bool:
    """True when the record left the node (or reached the spool); False when it was kept as undelivered."""
    try:
        _send(cfg, rec)
        return True
    except Exception as exc:
        keep = os.path.join(node_dir(cfg, rec["node"]), "undelivered")
        spool.write(keep, spool_name(rec), rec)
        _log(f"job {rec['job_id']}: could not deliver ({type(exc).__name__}: {exc}); kept in {keep}")
        return False


def flush_undelivered(cfg: NodeConfig, node: str) -> int:
    """Deliver what earlier epilogs on this node could not. Returns how many left."""
    sent = 0
    for path in spool.pending(os.path.join(node_dir(cfg, node), "undelivered")):
        try:
            rec = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            spool.quarantine(path, f"not valid JSON: {exc}")
            continue
        try:
            _send(cfg, rec)
        except Exception as exc:
            _log(f"{path} still undelivered: {type(exc).__name__}: {exc}")
            break
        os.unlink(path)
        sent += 1
    return sent
