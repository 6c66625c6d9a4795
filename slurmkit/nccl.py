"""NCCL settings: the environment a node type's fabric needs, and a lint that explains common mistakes.

Facts from NCCL 2.30's documentation and source (defaults) and the project's notes
(../shared/notes/binding-and-nccl.md). The fabric profile sets only what the fabric needs; NCCL's own
topology detection does the rest. Variables from NCCL's "debugging" section "should not be used in production
nor retained in scripts", so the lint warns about them.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurmkit.config.suggest import closest
from slurmkit.errors import Problem

# NCCL_IB_TIMEOUT default by NCCL version: 20 since 2.23, 18 in 2.14-2.22, 14 before.
IB_TIMEOUT_DEFAULTS = ((2, 23, 20), (2, 14, 18), (0, 0, 14))
DEFAULT_NCCL_VERSION = (2, 23)

# Variables in NCCL's "Debugging" section: tuning knobs that override NCCL's own choices.
DEBUGGING = {
    "NCCL_ALGO": "forces the collective algorithm; NCCL's tuner picks per size and topology",
    "NCCL_PROTO": "forces the protocol (LL/LL128/Simple); wrong choices corrupt performance or hang",
    "NCCL_IB_AR_THRESHOLD": "matters only with adaptive routing (default 8192)",
    "NCCL_NET_GDR_LEVEL": "overrides GPUDirect RDMA distance detection",
    "NCCL_NET_GDR_READ": "overrides GPUDirect RDMA read detection",
    "NCCL_P2P_LEVEL": "overrides peer-to-peer distance detection",
    "NCCL_P2P_DISABLE": "disables NVLink/PCIe peer-to-peer: a large slowdown on NVLink systems",
    "NCCL_SHM_DISABLE": "disables shared-memory transport",
    "NCCL_P2P_DIRECT_DISABLE": "disables direct P2P within a process",
    "NCCL_BUFFSIZE": "changes buffer size; costs GPU memory per peer",
    "NCCL_NTHREADS": "changes CUDA threads per block",
    "NCCL_MAX_NCHANNELS": "caps channels; lowers bandwidth",
    "NCCL_MIN_NCHANNELS": "forces channels",
    "NCCL_CHECKS_DISABLE": "disables argument checks",
    "NCCL_CHECK_POINTERS": "adds pointer checks (slow)",
    "NCCL_LAUNCH_MODE": "changes kernel launch mode",
    "NCCL_IB_QPS_PER_CONNECTION": "changes queue pairs per connection",
    "NCCL_IB_SPLIT_DATA_ON_QPS": "changes how data is split over QPs",
    "NCCL_IB_CUDA_SUPPORT": "overrides GPUDirect RDMA detection",
    "NCCL_SINGLE_RING_THRESHOLD": "legacy tuning threshold",
    "NCCL_LL_THRESHOLD": "legacy tuning threshold",
    "NCCL_TREE_THRESHOLD": "legacy tuning threshold",
    "NCCL_IGNORE_CPU_AFFINITY": "ignores the process's CPU binding when choosing NICs/GPUs",
    "NCCL_NET_DISABLE_INTRA": "changes intra-node transport choice",
    "NCCL_P2P_NET_CHUNKSIZE": "tuning knob",
    "NCCL_P2P_NVL_CHUNKSIZE": "tuning knob",
    "NCCL_P2P_PCI_CHUNKSIZE": "tuning knob",
    "NCCL_GRAPH_FILE": "replaces NCCL's search with a fixed graph",
    "NCCL_GRAPH_MIXING_SUPPORT": "tuning knob",
}

GENERAL = {
    "NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD",
    "NCCL_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_SLEEP_MSEC", "NCCL_CROSS_NIC", "NCCL_IB_HCA", "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE",
    "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_SL", "NCCL_IB_TC", "NCCL_IB_FIFO_TC", "NCCL_IB_RETURN_ASYNC_EVENTS",
    "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_ECE_ENABLE", "NCCL_IB_MERGE_NICS",
    "NCCL_IB_MERGE_VFS", "NCCL_IB_PKEY", "NCCL_IB_USE_INLINE", "NCCL_IB_DISABLE", "NCCL_OOB_NET_ENABLE",
    "NCCL_OOB_NET_IFNAME", "NCCL_UID_STAGGER_THRESHOLD", "NCCL_UID_STAGGER_RATE", "NCCL_NET", "NCCL_NET_PLUGIN",
    "NCCL_TUNER_PLUGIN", "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN", "NCCL_NET_SHARED_BUFFERS",
    "NCCL_NET_SHARED_COMMS", "NCCL_NET_GDR_C2C", "NCCL_NET_FORCE_FLUSH", "NCCL_NET_OPTIONAL_RECV_COMPLETION",
    "NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_TIMESTAMP_FORMAT",
    "NCCL_DEBUG_TIMESTAMP_LEVELS", "NCCL_COLLNET_ENABLE", "NCCL_COLLNET_NODE_THRESHOLD", "NCCL_TOPO_FILE",
    "NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE", "NCCL_SET_THREAD_NAME", "NCCL_COMM_ID", "NCCL_HOSTID",
    "NCCL_DMABUF_ENABLE", "NCCL_NVLS_ENABLE", "NCCL_NVLS_CHUNKSIZE", "NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE",
    "NCCL_P2P_PXN_LEVEL", "NCCL_P2P_USE_CUDA_MEMCPY", "NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_SHM_MEMCPY_MODE",
    "NCCL_SHM_LOCALITY", "NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_WORK_FIFO_DEPTH",
    "NCCL_WORK_FIFO_BYTES", "NCCL_RUNTIME_CONNECT", "NCCL_LOCAL_REGISTER", "NCCL_GRAPH_REGISTER",
    "NCCL_LEGACY_CUDA_REGISTER", "NCCL_CGA_CLUSTER_SIZE", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS",
    "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_CONF_FILE", "NCCL_MNNVL_ENABLE", "NCCL_MNNVL_UUID",
    "NCCL_MNNVL_CLIQUE_ID", "NCCL_COMM_BLOCKING", "NCCL_RAS_ENABLE", "NCCL_RAS_ADDR", "NCCL_RAS_TIMEOUT_FACTOR",
    "NCCL_CTA_POLICY", "NCCL_NET_MERGE_LEVEL", "NCCL_GDRCOPY_ENABLE", "NCCL_GDRCOPY_FLUSH_ENABLE",
    "NCCL_GDRCOPY_SYNC_ENABLE", "NCCL_GDRCOPY_FIFO_ENABLE", "NCCL_L1_SHARED_MEMORY_CARVEOUT",
    "NCCL_LAUNCH_ORDER_IMPLICIT", "NCCL_NVLS_NCHANNELS", "NCCL_IB_SPLIT_DATA_ON_QPS",
}

KNOWN = GENERAL | set(DEBUGGING)

# Names people copy from folklore, with what to write instead.
MISNAMED = {
    "NCCL_TOPO": ("there is no NCCL_TOPO: the algorithm is chosen with NCCL_ALGO (a debugging variable, best "
                  "left unset); NCCL_TOPO_FILE is the path of a topology XML for VMs", "NCCL_ALGO"),
    "NCCL_ASYNC_ERROR_HANDLING": ("a PyTorch variable, renamed TORCH_NCCL_ASYNC_ERROR_HANDLING (default 3); the "
                                  "old name is deprecated", "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
    "NCCL_BLOCKING_WAIT": ("a PyTorch variable, renamed TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT"),
}


def ib_timeout_default(version: tuple[int, int] = DEFAULT_NCCL_VERSION) -> int:
    for major, minor, value in IB_TIMEOUT_DEFAULTS:
        if version >= (major, minor):
            return value
    return 14


def lint_env(env: Mapping[str, str], *, nccl_version: tuple[int, int] = DEFAULT_NCCL_VERSION,
             storage_hcas: list[str] | None = None, fabric: str | None = None,
             allow_unknown: list[str] | None = None, key_prefix: str = "") -> list[Problem]:
    """Problems with user-set NCCL variables. Errors for names NCCL does not know; warnings for risky values.

    `key_prefix` lets callers locate problems (e.g. "nccl.env").
    """
    problems: list[Problem] = []
    allowed = set(allow_unknown or [])
    for name, raw in env.items():
        value = str(raw)
        key = f"{key_prefix}.{name}" if key_prefix else name
        if name in MISNAMED:
            msg, right = MISNAMED[name]
            sev = "error" if name == "NCCL_TOPO" else "warning"
            problems.append(Problem(msg, key=key, hint=f"use {right}" if sev == "error" else f"rename to {right}",
                                    severity=sev))
            continue
        if not name.startswith("NCCL_"):
            continue
        if name not in KNOWN and name not in allowed:
            best = closest(name, KNOWN, cutoff=0.75)
            hint = f"did you mean {best}?" if best else "see NCCL's environment-variable documentation"
            problems.append(Problem(f"{name} is not an NCCL variable (NCCL ignores it silently)", key=key,
                                    hint=hint + "; list it under nccl.allow_unknown if your NCCL build has it"))
            continue
        if name in DEBUGGING:
            problems.append(Problem(
                f"{name} is in NCCL's debugging section: {DEBUGGING[name]}; NCCL's documentation says such "
                "variables should not be used in production nor retained in scripts", key=key,
                hint="remove it unless you are debugging a specific problem", severity="warning"))
        problems.extend(_check_value(name, value, key, nccl_version, storage_hcas or [], fabric))
    return problems


def _check_value(name: str, value: str, key: str, version: tuple[int, int], storage: list[str],
                 fabric: str | None) -> list[Problem]:
    out: list[Problem] = []
    if name in ("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_IB_SL"):
        try:
            number = int(value)
        except ValueError:
            return [Problem(f"{name} must be an integer, got {value!r}", key=key)]
        if name == "NCCL_IB_TIMEOUT":
            default = ib_timeout_default(version)
            if not 1 <= number <= 31:
                out.append(Problem(f"NCCL_IB_TIMEOUT must be 1-31 (4.096 us x 2^t per retry), got {number}",
                                   key=key))
            elif number < default:
                out.append(Problem(
                    f"NCCL_IB_TIMEOUT={number} is below NCCL's default of {default} (NCCL >= "
                    f"{version[0]}.{version[1]}): it makes retries give up sooner. 'NCCL error 12' is "
                    "IBV_WC_RETRY_EXC_ERR; raise the timeout (22-23) only for large or lossy fabrics", key=key,
                    hint="remove it, or set a value above the default", severity="warning"))
        if name == "NCCL_IB_RETRY_CNT" and not 0 <= number <= 7:
            out.append(Problem(f"NCCL_IB_RETRY_CNT must be 0-7, got {number}", key=key))
    if name == "NCCL_IB_HCA":
        spec = value.lstrip("^")
        exact = spec.startswith("=")
        names = [h.split(":")[0] for h in spec.lstrip("=").split(",") if h]
        if not exact and not value.startswith("^") and any(n[-1:].isdigit() for n in names):
            out.append(Problem(
                f"NCCL_IB_HCA={value} is a prefix match: mlx5_1 also selects mlx5_10..mlx5_19", key=key,
                hint=f"write NCCL_IB_HCA=={','.join(names)} for an exact list", severity="warning"))
        bad = [n for n in names if n in storage] if not value.startswith("^") else []
        if bad:
            out.append(Problem(f"NCCL_IB_HCA names storage HCA(s) {', '.join(bad)}; NCCL traffic would share "
                               "the storage network", key=key, hint="list only compute HCAs", severity="warning"))
    if name == "NCCL_COLLNET_ENABLE" and value == "1" and fabric not in (None, "infiniband"):
        out.append(Problem(f"NCCL_COLLNET_ENABLE=1 needs SHARP-capable InfiniBand; it does nothing on {fabric}",
                           key=key, severity="warning"))
    if name == "NCCL_DEBUG" and value.upper() not in ("VERSION", "WARN", "INFO", "TRACE", "ABORT"):
        out.append(Problem(f"NCCL_DEBUG={value!r} is not a level", key=key,
                           hint="use WARN (production) or INFO (debugging)"))
    return out


def fabric_env(node_type) -> dict[str, str]:  # node_type: slurmkit.site.model.NodeType
    """The NCCL environment for a node type's fabric (what `sk render` exports before launching)."""
    fab = node_type.fabric
    env: dict[str, str] = {}
    if fab.socket_ifname:
        env["NCCL_SOCKET_IFNAME"] = fab.socket_ifname
    if fab.kind in ("infiniband", "roce"):
        # '=' makes the list exact: without it mlx5_1 would also match mlx5_10..19. Storage HCAs never listed.
        env["NCCL_IB_HCA"] = "=" + ",".join(node_type.compute_hcas)
        if fab.rail_optimized:
            env["NCCL_CROSS_NIC"] = "0"
        if fab.ib_timeout is not None:
            env["NCCL_IB_TIMEOUT"] = str(fab.ib_timeout)
        if fab.ib_sl is not None:
            env["NCCL_IB_SL"] = str(fab.ib_sl)
    if fab.kind == "roce":
        if fab.ib_gid_index is not None:
            env["NCCL_IB_GID_INDEX"] = str(fab.ib_gid_index)
        if fab.ib_tc is not None:
            env["NCCL_IB_TC"] = str(fab.ib_tc)
    if fab.kind == "infiniband" and fab.sharp:
        env["NCCL_COLLNET_ENABLE"] = "1"
    if fab.kind == "tcp":
        env["NCCL_IB_DISABLE"] = "1"
        if (fab.speed_gbps or 0) >= 100:
            env["NCCL_SOCKET_NTHREADS"] = "4"
            env["NCCL_NSOCKS_PERTHREAD"] = "4"
    if fab.kind == "slingshot":
        env["NCCL_NET"] = "AWS Libfabric"
        env["NCCL_NET_GDR_LEVEL"] = "PHB"
        env["NCCL_CROSS_NIC"] = "1"
        env.setdefault("FI_PROVIDER", "cxi")
    env.update(fab.nccl_env)
    return env
