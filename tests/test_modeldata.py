"""Plain copies of validated models (slurmkit/config/modeldata.py) must plan and render exactly like the pydantic models
they copy: `sk render`/`sk submit` plan from the copies, the library and the golden tests from the models."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from slurmkit.config.modeldata import JobSpecData, Plain, SiteData, plain_copy
from slurmkit.errors import InputError
from slurmkit.plan import make_plan
from slurmkit.render import plan_summary, render
from slurmkit.site.model import load_site
from slurmkit.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
SITES = sorted((ROOT / "site_config").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
def _outcome(spec, site, src) -> tuple:
    try:
        plan = make_plan(spec, site, src)
    except InputError as exc:
        return ("refused", exc.format())
    return (render(plan), plan_summary(plan), [w.format() for w in plan.warnings])


@pytest.mark.parametrize("site_path", SITES, ids=lambda p: p.stem)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_a_copy_plans_and_renders_exactly_like_the_model(example, site_path):
    spec, src = load_spec(str(example))
    site = load_site(site_path)
    copies = pickle.loads(pickle.dumps((plain_copy(spec), plain_copy(site))))  # as configcache stores them
    assert isinstance(copies[0], JobSpecData) and isinstance(copies[1], SiteData)
    assert _outcome(*copies, src) == _outcome(spec, site, src)


@pytest.mark.parametrize("overrides", [["nodes=99"], ["gpus_per_node=9", "launcher=mpi"], ["nccl.env.NCCL_TOPO=x"],
                                       ["partition=nope"], ["time=30-00:00:00"], ["sbatch_extra.gres=gpu:2"]])
def test_a_copy_is_refused_with_the_same_message_as_the_model(overrides):
    spec, src = load_spec(str(ROOT / "examples" / "torchrun-2node.yaml"), overrides)
    site = load_site(ROOT / "site_config" / "dgx-a100.yaml")
    refused = _outcome(spec, site, src)
    assert refused[0] == "refused"
    assert _outcome(plain_copy(spec), plain_copy(site), src) == refused


def _same_fields(model, copy, where="") -> None:
    if hasattr(type(model), "model_fields"):
        assert isinstance(copy, Plain), where
        assert set(vars(copy)) == set(type(model).model_fields), where
        for name in type(model).model_fields:
            _same_fields(getattr(model, name), getattr(copy, name), f"{where}.{name}")
    elif isinstance(model, dict):
        assert model.keys() == copy.keys(), where
        for k in model:
            _same_fields(model[k], copy[k], f"{where}[{k!r}]")
    elif isinstance(model, list):
        assert len(model) == len(copy), where
        for i, (m, c) in enumerate(zip(model, copy, strict=True)):
            _same_fields(m, c, f"{where}[{i}]")
    else:
        assert type(model) is type(copy) and model == copy, where


@pytest.mark.parametrize("site_path", SITES, ids=lambda p: p.stem)
def test_every_field_and_method_answers_alike(site_path):
    site = load_site(site_path)
    copy = plain_copy(site)
    _same_fields(site, copy)
    assert copy.slurm_version_tuple == site.slurm_version_tuple
    assert copy.resolve_path("templates") == site.resolve_path("templates")
    for name, part in site.partitions.items():
        assert copy.partition(name).max_minutes == part.max_minutes
        nt, cnt = site.node_type_of(name), copy.node_type_of(name)
        assert (cnt.cpus, cnt.memory_mib) == (nt.cpus, nt.memory_mib)
        for g in nt.gpus:
            assert cnt.gpu_by_index(g.index).cpu_list == g.cpu_list
    sweep, _ = load_spec(str(ROOT / "examples" / "sweep.yaml"))
    arr = plain_copy(sweep).array
    assert (arr.names, arr.size, [arr.task(i) for i in range(arr.size)]) == \
        (sweep.array.names, sweep.array.size, [sweep.array.task(i) for i in range(sweep.array.size)])
    assert plain_copy(sweep).argv == sweep.argv
