"""fabric.ucx_tls reaches the MPI ranks: `launcher: mpi` scripts export UCX_TLS (the launcher whose ranks use UCX),
other launchers do not, a user's env: value wins with the precedence warning, and a malformed value is an error
that names the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmkit.config.source import loads
from slurmkit.errors import SiteConfigError
from slurmkit.plan import make_plan
from slurmkit.render import render
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source
from tests.test_nccl_precedence import exported

ROOT = Path(__file__).resolve().parents[1]


def site_with(tmp_path: Path, ucx_tls: str | None):
    text = (ROOT / "site_config" / "dgx-a100.yaml").read_text()
    if ucx_tls is not None:
        text = text.replace("      rail_optimized: true", f"      rail_optimized: true\n      ucx_tls: '{ucx_tls}'")
    path = tmp_path / "site.yaml"
    path.write_text(text)
    return path


def script(site: Path, launcher: str, **extra) -> tuple[str, list[str]]:
    src = loads(json.dumps({"name": "t", "launcher": launcher, "nodes": 2, "command": ["osu_allreduce"],
                            **extra}), "t.yaml")
    plan = make_plan(spec_from_source(src), load_site(site), src)
    return render(plan), [p.format() for p in plan.warnings]


def test_mpi_jobs_export_the_sites_ucx_tls_and_others_do_not(tmp_path):
    site = site_with(tmp_path, "rc,sm,self,cuda_copy")
    mpi, _ = script(site, "mpi")
    assert exported(mpi, "UCX_TLS") == (1, "rc,sm,self,cuda_copy")
    torchrun, _ = script(site, "torchrun", command=["train.py"])
    assert exported(torchrun, "UCX_TLS") == (0, "")


def test_without_ucx_tls_nothing_is_exported(tmp_path):
    mpi, _ = script(site_with(tmp_path, None), "mpi")
    assert exported(mpi, "UCX_TLS") == (0, "")


def test_a_users_env_beats_the_site_with_a_warning_naming_both(tmp_path):
    mpi, warnings = script(site_with(tmp_path, "rc,sm,self"), "mpi", env={"UCX_TLS": "tcp,self"})
    assert exported(mpi, "UCX_TLS") == (1, "tcp,self")
    assert any("UCX_TLS" in w and "tcp,self" in w and "rc,sm,self" in w for w in warnings), warnings


@pytest.mark.parametrize("bad", ["rc sm", "rc;touch x", "rc,,sm", "RC"])
def test_a_malformed_ucx_tls_is_an_error_naming_the_key(tmp_path, bad):
    with pytest.raises(SiteConfigError) as err:
        load_site(site_with(tmp_path, bad))
    assert "ucx_tls" in err.value.format() and "UCX transport list" in err.value.format(), err.value.format()
