"""NCCL settings: the environment a node type's fabric needs, and a lint that explains common mistakes.

Facts from NCCL 2.30's documentation and source (defaults), collected in docs/binding-and-nccl.md. The fabric
profiles (FABRICS, below) set only what the fabric needs; NCCL's own topology detection does the rest. Variables
from NCCL's "debugging" section "should not be used in production nor retained in scripts", so the lint warns
about them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from slurmkit.config.suggest import closest
from slurmkit.errors import Problem


class NodeType(Protocol):
    """What the fabric rules read of a node type (slurmkit.site.model.NodeType): a protocol, so that this module
    does not import the site model, which imports the fabric profiles from here."""

    fabric: Any
    compute_hcas: list[str]
    storage_hcas: list[str]

# NCCL_IB_TIMEOUT default by NCCL version: 20 since 2.23, 18 in 2.14-2.22, 14 before.
IB_TIMEOUT_DEFAULTS = ((2, 23, 20), (2, 14, 18), (0, 0, 14))
DEFAULT_NCCL_VERSION = (2, 23)

# Defaults that became -1 ("automatic") in a given NCCL release, read from NVIDIA/nccl's NCCL_PARAM lines in
# src/transport/net_ib.cc at tags v2.20.5-1, v2.21.5-1, v2.25.1-1 and v2.26.2-1 (src/transport/net_ib/connect.cc
# in 2.31): IB_GID_INDEX 0 -> -1 in 2.21 (RoCE: NCCL picks a RoCE v2 GID matching NCCL_IB_ADDR_FAMILY/
# NCCL_IB_ADDR_RANGE, ncclIbGetGidIndex); IB_SL and IB_TC 0 -> -1 in 2.26 (-1: the communicator's
# ncclConfig_t.trafficClass when the application set one, else NCCL_IB_SL_DEFAULT/NCCL_IB_TC_DEFAULT, both 0).
# IB_GID_INDEX is read only on a RoCE (Ethernet) link layer: on InfiniBand NCCL addresses by LID (and from 2.22
# picks a routable-FLID GID itself, NCCL_IB_ROUTABLE_FLID_GID_INDEX). IB_TC goes into the GRH, which RoCE always
# has; IB_SL applies to both link layers. Each: (version of the change, default before it, valid range).
AUTOMATIC_SINCE: dict[str, tuple[tuple[int, int], int, tuple[int, int]]] = {
    "NCCL_IB_GID_INDEX": ((2, 21), 0, (0, 255)),
    "NCCL_IB_SL": ((2, 26), 0, (0, 15)),
    "NCCL_IB_TC": ((2, 26), 0, (0, 255)),
}
_AUTOMATIC_MEANS = {
    "NCCL_IB_GID_INDEX": "NCCL selects the RoCE v2 GID of the address family/range it is given",
    "NCCL_IB_SL": "the communicator's trafficClass if the application set one, else 0",
    "NCCL_IB_TC": "the communicator's trafficClass if the application set one, else 0",
}


def ib_default(name: str) -> str:
    """NCCL's default of an IB variable whose default changed, with the version: for the lint and the guide."""
    (major, minor), before, _ = AUTOMATIC_SINCE[name]
    return (f"-1 (automatic: {_AUTOMATIC_MEANS[name]}) since NCCL {major}.{minor}, {before} in older releases")

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


def parse_ifname_spec(spec: str) -> tuple[bool, bool, list[str]]:
    """NCCL_SOCKET_IFNAME's rule (NCCL env docs): a comma list of prefixes; a leading `^` makes the whole list
    exclusions, a leading `=` (after any `^`) makes the entries exact names. -> (exclude, exact, entries)."""
    exclude = spec.startswith("^")
    rest = spec[1:] if exclude else spec
    exact = rest.startswith("=")
    return exclude, exact, [i for i in (rest[1:] if exact else rest).split(",") if i]


def select_ifnames(spec: str, names: list[str]) -> list[str]:
    """The interfaces among `names` that NCCL_SOCKET_IFNAME=`spec` selects."""
    exclude, exact, items = parse_ifname_spec(spec)

    def hit(name: str) -> bool:
        return any(name == i or (not exact and name.startswith(i)) for i in items)

    return [n for n in names if hit(n) != exclude]


def ifnames_outside(user: str, site: str) -> list[str]:
    """The entries of a user's NCCL_SOCKET_IFNAME that can select no interface the site's one selects (the node
    type's fabric.socket_ifname): `eth0` or `ib0` where the site says `ibp`. An entry and a site prefix overlap
    when one is a prefix of the other; a user's exclusion list (`^...`) names no interface and is not checked."""
    u_excl, u_exact, u_items = parse_ifname_spec(user)
    s_excl, s_exact, s_items = parse_ifname_spec(site)
    if u_excl:
        return []

    def overlaps(u: str, s: str) -> bool:
        if u_exact and s_exact:
            return u == s
        if u_exact:
            return u.startswith(s)
        if s_exact:
            return s.startswith(u)
        return u.startswith(s) or s.startswith(u)

    if s_excl:  # the site allows everything but its list: an entry wholly inside an excluded prefix is outside
        return [u for u in u_items if any(u == s or (not s_exact and u.startswith(s)) for s in s_items)]
    return [u for u in u_items if not any(overlaps(u, s) for s in s_items)]


def lint_env(env: Mapping[str, str], *, nccl_version: tuple[int, int] = DEFAULT_NCCL_VERSION,
             storage_hcas: list[str] | None = None, fabric: str | None = None,
             allow_unknown: list[str] | None = None, key_prefix: str = "",
             rail_optimized: bool | None = None, sharp: bool | None = None,
             socket_ifname: str | None = None) -> list[Problem]:
    """Problems with user-set NCCL variables. Errors for names NCCL does not know; warnings for risky values.

    `key_prefix` lets callers locate problems (e.g. "nccl.env"). `fabric`, `rail_optimized`, `sharp` and
    `socket_ifname` are the node type's (None: unknown, and the checks that need them are skipped).
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
        if name in DEBUGGING and profile_rule(fabric, name) is None:
            # Where the site's fabric profile sets it (Slingshot's NCCL_NET_GDR_LEVEL) the user's value is the
            # profile's or overrides it; the planner's precedence warning names both values.
            problems.append(Problem(
                f"{name} is in NCCL's debugging section: {DEBUGGING[name]}; NCCL's documentation says such "
                "variables should not be used in production nor retained in scripts", key=key,
                hint="remove it unless you are debugging a specific problem", severity="warning"))
        problems.extend(_check_value(name, value, key, nccl_version, storage_hcas or [], fabric))
        problems.extend(_check_against_site(name, value, key, fabric, rail_optimized, sharp, socket_ifname))
    return problems


def _check_against_site(name: str, value: str, key: str, fabric: str | None, rail_optimized: bool | None,
                        sharp: bool | None, socket_ifname: str | None) -> list[Problem]:
    """Values that are legal but wrong for the site's fabric or for a production job (NCCL's environment-variable
    documentation, https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)."""
    out: list[Problem] = []
    rdma = fabric in ("infiniband", "roce")
    if name == "NCCL_IB_DISABLE" and value.strip() == "1" and rdma:
        out.append(Problem(f"NCCL_IB_DISABLE=1 on a {fabric} site: NCCL stops using the RDMA HCAs and sends all "
                           "inter-node traffic over IP sockets (NCCL docs, NCCL_IB_DISABLE)", key=key,
                           hint="remove it; the site's fabric profile sets what NCCL needs", severity="warning"))
    if name == "NCCL_DEBUG" and value.strip().upper() in ("INFO", "TRACE"):
        out.append(Problem(f"NCCL_DEBUG={value} left in a job: every rank logs its topology, channels and "
                           "connections at start and on every communicator (log volume, slower start)", key=key,
                           hint="use WARN in production (nccl.debug: INFO for the run you are debugging)",
                           severity="warning"))
    if name == "NCCL_DEBUG_SUBSYS" and "ALL" in value.upper().replace(" ", "").split(","):
        out.append(Problem("NCCL_DEBUG_SUBSYS=ALL logs every subsystem (with NCCL_DEBUG=INFO, a very large log)",
                           key=key, hint="name the subsystems you need (e.g. INIT,NET) or unset it",
                           severity="warning"))
    if name == "NCCL_CROSS_NIC" and value.strip() == "1" and rail_optimized:
        out.append(Problem("NCCL_CROSS_NIC=1 on a rail-optimized fabric: rings may use a different NIC (rail) on "
                           "each node, so traffic crosses the spine instead of staying on one rail switch", key=key,
                           hint="remove it (the site profile sets NCCL_CROSS_NIC=0)", severity="warning"))
    if name == "NCCL_IB_GID_INDEX" and fabric == "infiniband":
        out.append(Problem("NCCL_IB_GID_INDEX on an InfiniBand fabric has no effect: NCCL reads it only on a RoCE "
                           "(Ethernet) link layer; on InfiniBand it addresses by LID, and since NCCL 2.22 picks a "
                           "routable-FLID GID itself (NCCL_IB_ROUTABLE_FLID_GID_INDEX)", key=key,
                           hint="remove it, or set fabric.kind: roce if the HCAs' link layer is Ethernet",
                           severity="warning"))
    outside = ifnames_outside(value.strip(), socket_ifname) if name == "NCCL_SOCKET_IFNAME" and socket_ifname else []
    if outside:
        out.append(Problem(f"NCCL_SOCKET_IFNAME={value}: {', '.join(outside)} can match no interface the node type "
                           f"has (its fabric.socket_ifname is {socket_ifname!r}, a prefix as NCCL reads it); a value "
                           "that selects nothing stops NCCL at init (\"Bootstrap : no socket interface found\", "
                           "src/bootstrap.cc)", key=key,
                           hint=f"remove it (the site profile sets NCCL_SOCKET_IFNAME={socket_ifname}), or use a "
                           "name the node type's interfaces start with", severity="warning"))
    if name == "NCCL_COLLNET_ENABLE" and value.strip() == "1" and fabric == "infiniband" and sharp is False:
        out.append(Problem("NCCL_COLLNET_ENABLE=1 but the site declares no SHARP (fabric.sharp false): without "
                           "SHARP switches and the collnet plugin there is nothing to enable", key=key,
                           hint="remove it, or set fabric.sharp: true where SHARP is really there",
                           severity="warning"))
    return out


def _check_value(name: str, value: str, key: str, version: tuple[int, int], storage: list[str],
                 fabric: str | None) -> list[Problem]:
    out: list[Problem] = []
    if name in ("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT", *AUTOMATIC_SINCE):
        try:
            number = int(value)
        except ValueError:
            return [Problem(f"{name} must be an integer, got {value!r}", key=key)]
        if name in AUTOMATIC_SINCE:
            (major, minor), _before, (low, high) = AUTOMATIC_SINCE[name]
            if number == -1:
                out.append(Problem(
                    f"{name}=-1 is NCCL's default: {ib_default(name)}; NCCL before {major}.{minor} has no automatic "
                    "value and would use -1 as it is", key=key, hint="remove it", severity="warning"))
            elif not low <= number <= high:
                out.append(Problem(f"{name} must be {low}-{high} (or unset: {ib_default(name)}), got {number}",
                                   key=key))
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
    if name == "NCCL_COLLNET_ENABLE" and value == "1" and fabric in FABRICS and not any(
            r.variable == name for r in FABRICS[fabric].rules):
        out.append(Problem(f"NCCL_COLLNET_ENABLE=1 needs SHARP-capable InfiniBand; it does nothing on {fabric}",
                           key=key, severity="warning"))
    if name == "NCCL_DEBUG" and value.upper() not in ("VERSION", "WARN", "INFO", "TRACE", "ABORT"):
        out.append(Problem(f"NCCL_DEBUG={value!r} is not a level", key=key,
                           hint="use WARN (production) or INFO (debugging)"))
    return out


# ---- fabric profiles ---------------------------------------------------------------------------------------
# What each fabric kind makes slurmkit export: (variable, value rule, reason), read by the planner (fabric_env),
# the site guide (slurmkit/docs/why.py: the reason of every variable) and the CLI (the --fabric choices). A value
# rule returns None where the variable is not set for that node type.


@dataclass(frozen=True)
class Rule:
    variable: str
    value: Callable[[NodeType], str | None]
    reason: Callable[[str, NodeType], str]  # (value, node type) -> why, for the site guide
    #: Where the value comes from, for a variable NCCL's documentation alone does not justify (the guide cites it).
    source: str = ""


@dataclass(frozen=True)
class FabricProfile:
    kind: str
    summary: str
    rules: tuple[Rule, ...]
    #: NCCL reaches the other nodes through RDMA HCAs, so the node type must list its compute HCAs.
    needs_compute_hcas: bool = False
    #: The link layer /sys/class/infiniband reports on its HCAs (discovery, `sk doctor`); None: no RDMA HCAs.
    link_layer: str | None = None


#: HPE's recommended NCCL/libfabric environment for Slingshot (also what Isambard-AI's and Sigma2 Olivia's NCCL
#: modules set, docs.isambard.ac.uk/user-documentation/guides/nccl, documentation.sigma2.no/hpc_machines/olivia).
SLINGSHOT_SOURCE = "HPE, shs-ccl-docs: ccl_env.sh (https://github.com/HewlettPackard/shs-ccl-docs)"


def profile_rule(fabric: str | None, name: str) -> Rule | None:
    """The fabric profile's rule for this variable, if the profile sets it."""
    profile = FABRICS.get(fabric or "")
    return next((r for r in profile.rules if r.variable == name), None) if profile else None


def _opt(value: object) -> str | None:
    return None if value is None else str(value)


_SOCKET_IFNAME = Rule(
    "NCCL_SOCKET_IFNAME", lambda nt: nt.fabric.socket_ifname,
    lambda v, nt: (f"NCCL's bootstrap (and, on TCP fabrics, its data) goes over `{v}`, the interface the site config "
                   "names; left to auto-detection NCCL may pick a docker or loopback interface."))
# '=' makes the list exact: without it mlx5_1 would also match mlx5_10..19. Storage HCAs are never listed.
_IB_HCA = Rule(
    "NCCL_IB_HCA", lambda nt: "=" + ",".join(nt.compute_hcas),
    lambda v, nt: ("Exactly the compute HCAs of this node type. The leading `=` makes the list exact: without it "
                   "`mlx5_1` would also select `mlx5_10`..`mlx5_19`."
                   + (f" The storage HCAs ({', '.join(nt.storage_hcas)}) are left out so that NCCL traffic never "
                      "shares the storage network." if nt.storage_hcas else "")))
_RAIL = Rule(
    "NCCL_CROSS_NIC", lambda nt: "0" if nt.fabric.rail_optimized else None,
    lambda v, nt: ("`0`: the fabric is rail-optimized (NIC *n* of every node on the same leaf switch), so a ring "
                   "must stay on one rail; NCCL's default (2) would let it cross rails."))
_IB_TIMEOUT = Rule(
    "NCCL_IB_TIMEOUT", lambda nt: _opt(nt.fabric.ib_timeout),
    lambda v, nt: (f"Set by the site for a large or lossy fabric. Each retry waits 4.096 us x 2^{v}; NCCL's default "
                   f"is {ib_timeout_default()} since NCCL 2.23 (18 in 2.14-2.22)."))
_IB_SL = Rule("NCCL_IB_SL", lambda nt: _opt(nt.fabric.ib_sl),
              lambda v, nt: (f"Service level {v}, the one the site's fabric (subnet manager QoS, or RoCE PFC) "
                             f"reserves for NCCL traffic. NCCL's default is {ib_default('NCCL_IB_SL')}."))
_RDMA = (_SOCKET_IFNAME, _IB_HCA, _RAIL, _IB_TIMEOUT, _IB_SL)

FABRICS: dict[str, FabricProfile] = {p.kind: p for p in (
    FabricProfile(
        "infiniband", "InfiniBand: NCCL over the compute HCAs (verbs), optionally with SHARP", (
            *_RDMA,
            Rule("NCCL_COLLNET_ENABLE", lambda nt: "1" if nt.fabric.sharp else None,
                 lambda v, nt: ("The InfiniBand switches support SHARP and an aggregation manager runs, so NCCL may "
                                "offload reductions to the network (needs the SHARP plugin)."))),
        needs_compute_hcas=True, link_layer="InfiniBand"),
    FabricProfile(
        "roce", "RoCE: RDMA over Ethernet through the compute HCAs, with the site's GID index and traffic class", (
            *_RDMA,
            Rule("NCCL_IB_GID_INDEX", lambda nt: _opt(nt.fabric.ib_gid_index),
                 lambda v, nt: (f"RoCE: the GID table entry ({v}) that holds the NIC's RoCE v2 address on this "
                                "fabric, as the site configured it; which entry that is depends on how the hosts' "
                                "addresses are set up. NCCL's default is "
                                f"{ib_default('NCCL_IB_GID_INDEX')}, so a fixed entry matters where that "
                                "choice is wrong or NCCL is older.")),
            Rule("NCCL_IB_TC", lambda nt: _opt(nt.fabric.ib_tc),
                 lambda v, nt: (f"RoCE: traffic class {v}, the QoS class the site's switches reserve for RDMA "
                                f"traffic. NCCL's default is {ib_default('NCCL_IB_TC')}."))),
        needs_compute_hcas=True, link_layer="Ethernet"),
    FabricProfile(
        "tcp", "TCP only: NCCL over sockets, tuned for links of 100 Gb/s and more", (
            _SOCKET_IFNAME,
            Rule("NCCL_IB_DISABLE", lambda nt: "1",
                 lambda v, nt: "A TCP-only fabric: NCCL must not look for InfiniBand/RoCE devices."),
            Rule("NCCL_SOCKET_NTHREADS", lambda nt: "4" if (nt.fabric.speed_gbps or 0) >= 100 else None,
                 lambda v, nt: (f"TCP at {nt.fabric.speed_gbps} Gb/s: more socket threads (4) with 4 sockets each, "
                                "the usual setting for 100G and faster TCP links, instead of NCCL's defaults.")),
            Rule("NCCL_NSOCKS_PERTHREAD", lambda nt: "4" if (nt.fabric.speed_gbps or 0) >= 100 else None,
                 lambda v, nt: "See NCCL_SOCKET_NTHREADS: sockets per thread on a fast TCP link."))),
    FabricProfile(
        "slingshot", "HPE Slingshot: NCCL through the AWS libfabric plugin (cxi provider)", (
            _SOCKET_IFNAME,
            Rule("NCCL_NET", lambda nt: "AWS Libfabric",
                 lambda v, nt: "Slingshot: NCCL talks to the network through the AWS libfabric plugin."),
            # A debugging-section variable that the lint warns users about, set here on purpose: Slingshot's NICs
            # hang off the CPU's root complex, which NCCL's default GPUDirect cutoff (PXB: GPU and NIC under one
            # PCI switch) rules out, so without it every inter-node transfer is staged through host memory.
            # HPE's recommended environment for NCCL over aws-ofi-nccl sets exactly this value.
            Rule("NCCL_NET_GDR_LEVEL", lambda nt: "PHB",
                 lambda v, nt: ("Slingshot NICs attach to the CPU's PCIe root complex, beyond NCCL's default "
                                "GPUDirect RDMA cutoff (PXB); PHB lets NCCL use GPUDirect RDMA to them instead of "
                                "staging through host memory. A debugging-section variable, set here because "
                                "HPE's recommended NCCL environment for Slingshot sets it."),
                 source=SLINGSHOT_SOURCE),
            Rule("NCCL_CROSS_NIC", lambda nt: "1",
                 lambda v, nt: "`1`: all NICs reach one switch fabric (Slingshot), so crossing NICs costs nothing.",
                 source=SLINGSHOT_SOURCE),
            Rule("FI_PROVIDER", lambda nt: "cxi", lambda v, nt: "Slingshot: libfabric's cxi provider."))),
)}
#: The one list of fabric kinds: the site config's `fabric.kind` choices, `sk site discover --fabric`.
FABRIC_KINDS = tuple(FABRICS)


def fabric_rules(node_type: NodeType) -> list[tuple[Rule, str]]:
    """The profile's rules that apply to this node type, each with its value, in export order."""
    out = []
    for rule in FABRICS[node_type.fabric.kind].rules:
        value = rule.value(node_type)
        if value is not None:
            out.append((rule, value))
    return out


def fabric_env(node_type: NodeType) -> dict[str, str]:
    """The NCCL environment for a node type's fabric (what `sk render` exports before launching): its profile's
    variables, then the site's own `fabric.nccl_env`."""
    env = {rule.variable: value for rule, value in fabric_rules(node_type)}
    env.update(node_type.fabric.nccl_env)
    return env
