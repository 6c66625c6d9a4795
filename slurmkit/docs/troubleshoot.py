"""Troubleshooting: the exact messages slurmkit prints for common mistakes, captured at build time by running
the real loader, validator and planner on known-bad inputs made for this site (its partitions, GPU counts and
limits), never copied by hand. `sk validate` prints these same lines on stderr (tests/test_docs.py checks it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import yaml

from slurmkit.config.source import loads
from slurmkit.config.units import format_time
from slurmkit.errors import InputError, SlurmkitError
from slurmkit.plan import make_plan
from slurmkit.site.model import Site, site_from_source
from slurmkit.spec import spec_from_source

SPEC_FILE = "train.yaml"
SITE_FILE = "site.yaml"


@dataclass
class Case:
    title: str
    explanation: str
    input: str  # the YAML a user wrote (spec cases) or the change made to the site config (site cases)
    output: str = ""  # what slurmkit prints on stderr
    exit_code: int = 0


@dataclass
class _SpecCase:
    title: str
    explanation: str
    body: Callable[[Site], str | None]  # YAML text, or None when the mistake cannot happen on this site
    warning: bool = False  # True: valid, but slurmkit warns


def _defaults(site: Site) -> tuple[str, int]:
    pname = site.default_partition or next(iter(site.partitions))
    return pname, site.node_type_of(pname).gpu.count


def _spec(site: Site, extra: str, launcher: str = "torchrun", command: str = "[train.py]") -> str:
    _, count = _defaults(site)
    return f"name: train\nlauncher: {launcher}\ngpus_per_node: {count}\n{extra}command: {command}\n"


def _max_nodes(site: Site) -> int:
    part = site.partitions[_defaults(site)[0]]
    return min(part.max_nodes or part.nodes, part.nodes)


def _qos_case(site: Site) -> str | None:
    pname, _ = _defaults(site)
    part = site.partitions[pname]
    if not part.qos:
        return None
    bad = part.qos[0] + "x"
    return _spec(site, f"qos: {bad}\n")


SPEC_CASES = [
    _SpecCase("A misspelt key", "Every key of the job spec is checked; an unknown one is an error (never ignored), "
              "with the closest valid key suggested.", lambda s: _spec(s, 'tme: "01:00:00"\n')),
    _SpecCase("A partition that does not exist", "The partition must be one of this cluster's.",
              lambda s: _spec(s, f"partition: {_defaults(s)[0]}s\n")),
    _SpecCase("More GPUs per node than a node has", "GPUs are requested per node; a job that needs more GPUs uses "
              "more nodes.", lambda s: _spec(s, "").replace(f"gpus_per_node: {_defaults(s)[1]}",
                                                            f"gpus_per_node: {_defaults(s)[1] * 2}")),
    _SpecCase("More nodes than the partition allows", "Each partition has a per-job node limit (see the cluster "
              "overview).", lambda s: _spec(s, f"nodes: {_max_nodes(s) + 1}\n")),
    _SpecCase("A time limit above the partition's", "Slurm would reject the job at submission; slurmkit says so "
              "before it is submitted.",
              lambda s: _spec(s, f'time: "{format_time(s.partitions[_defaults(s)[0]].max_minutes + 1440)}"\n')),
    _SpecCase("A time limit Slurm cannot read", "Times are Slurm's formats: minutes, MM:SS, HH:MM:SS, D-HH or "
              "D-HH:MM:SS.", lambda s: _spec(s, "time: 4h\n")),
    _SpecCase("A QOS the partition does not allow", "Each partition lists the QOS it accepts.", _qos_case),
    _SpecCase("Both gpus and gpus_per_node", "Give the total (`gpus`) or the per-node count, not both.",
              lambda s: _spec(s, "gpus: 2\n")),
    _SpecCase("Starting torchrun yourself", "With `launcher: torchrun`, slurmkit starts torchrun on every node; "
              "the command is what torchrun runs.",
              lambda s: _spec(s, "", command="[torchrun, --nproc-per-node=8, train.py]")),
    _SpecCase("Per-task GPU binding", "`--gpus-per-task` implies per-task GPU binding (Slurm 21.08+): every rank "
              "gets its own device cgroup and NCCL loses CUDA IPC/NVLink between ranks.",
              lambda s: None if s.partitions[_defaults(s)[0]].allow_task_sharing else
              _spec(s, "sbatch_extra: {gpus-per-task: 1}\n")),
    _SpecCase("An option slurmkit decides", "Options such as the time limit have their own spec key; "
              "`sbatch_extra` is only for options slurmkit does not plan.",
              lambda s: _spec(s, 'sbatch_extra: {time: "01:00:00"}\n')),
    _SpecCase("NCCL_TOPO", "A variable from folklore: NCCL has no NCCL_TOPO.",
              lambda s: _spec(s, "nccl:\n  env: {NCCL_TOPO: ring}\n")),
    _SpecCase("A misspelt NCCL variable", "NCCL ignores variables it does not know, silently; slurmkit does not.",
              lambda s: _spec(s, "nccl:\n  env: {NCCL_SOCKET_IFNAMES: ib0}\n")),
    _SpecCase("Lowering NCCL_IB_TIMEOUT (a warning)", "A warning: the job is valid and still renders and submits, "
              "but the value makes InfiniBand retries give up sooner than NCCL's default.",
              lambda s: _spec(s, "nccl:\n  env: {NCCL_IB_TIMEOUT: 18}\n"), warning=True),
    _SpecCase("A debugging variable (a warning)", "NCCL documents these as debugging aids that should not stay in "
              "job scripts.", lambda s: _spec(s, "nccl:\n  env: {NCCL_ALGO: Ring}\n"), warning=True),
    _SpecCase("A container on a cluster without a container runtime", "This cluster has no pyxis or Apptainer "
              "configured.", lambda s: None if s.container_runtime != "none" else
              _spec(s, "container: {image: 'nvcr.io#nvidia/pytorch:24.05-py3'}\n")),
    _SpecCase("A YAML syntax error", "The file is not valid YAML (here: a value indented under a key that already "
              "has one).", lambda s: "name: train\n  launcher: torchrun\ncommand: [train.py]\n"),
]


def spec_case(site: Site, text: str) -> tuple[str, int]:
    """What `sk validate train.yaml` prints on stderr for this spec text, and its exit status."""
    try:
        src = loads(text, SPEC_FILE)
        spec = spec_from_source(src)
        plan = make_plan(spec, site, src)
    except InputError as exc:
        return exc.format() + "\n", exc.exit_code
    return "".join(w.format() + "\n" for w in plan.warnings), 0


def spec_cases(site: Site) -> list[Case]:
    out = []
    for c in SPEC_CASES:
        text = c.body(site)
        if text is None:
            continue
        output, code = spec_case(site, text)
        if (code == 0) != c.warning or not output:
            # The validator no longer reacts as this page says: stop rather than document it wrongly.
            raise SlurmkitError(f"docs: troubleshooting case {c.title!r} expected "
                                f"{'a warning' if c.warning else 'an error'}, slurmkit printed {output!r} "
                                f"(exit {code})")
        out.append(Case(c.title, c.explanation, text, output, code))
    return out


def _site_mutations(site: Site) -> list[tuple[str, str, Callable[[dict], None]]]:
    """(title, change described, mutation of the site's data) for mistakes admins make in a site config."""
    nt_name, nt = next(iter(site.node_types.items()))
    cases: list[tuple[str, str, Callable[[dict], None]]] = []
    if nt.storage_hcas:
        h = nt.storage_hcas[0]
        cases.append(("A storage HCA given as a GPU's compute HCA", f"node_types.{nt_name}.gpus[0].hca: {h}",
                      lambda d: d["node_types"][nt_name]["gpus"][0].__setitem__("hca", h)))
    cases.append(("A GPU on a CPU the node does not have", f"node_types.{nt_name}.gpus[0].cpus: "
                  f'"{nt.cpus}-{nt.cpus + 7}"',
                  lambda d: d["node_types"][nt_name]["gpus"][0].__setitem__("cpus", f"{nt.cpus}-{nt.cpus + 7}")))
    pname = next(iter(site.partitions))
    cases.append(("A partition naming a node type that is not described",
                  f"partitions.{pname}.node_type: {nt_name}-v2",
                  lambda d: d["partitions"][pname].__setitem__("node_type", f"{nt_name}-v2")))
    cases.append(("A misspelt site key", "slurm_versoin instead of slurm_version",
                  lambda d: d.__setitem__("slurm_versoin", d.pop("slurm_version"))))
    return cases


def site_cases(site: Site, site_data: dict) -> list[Case]:
    """Known-bad variants of this very site config, each loaded by the real site loader."""
    out = []
    for title, change, mutate in _site_mutations(site):
        data = copy.deepcopy(site_data)
        mutate(data)
        try:
            site_from_source(loads(yaml.safe_dump(data, sort_keys=False), SITE_FILE))
        except InputError as exc:
            out.append(Case(title, "", change, exc.format() + "\n", exc.exit_code))
            continue
        raise SlurmkitError(f"docs: the site loader accepted the known-bad change {change!r} ({title})")
    return out
