"""The devcluster's hook settings (contrib/devcluster/hook-settings.in, which `up` hands to contrib/slurm/install-hooks)
are what site_config/devcluster.yaml says:
the hooks never read the YAML, so the two must be kept in agreement by hand, and this test is the check."""

from __future__ import annotations

import re
from pathlib import Path

from slurmkit.accounting.sampler import NodeConfig
from slurmkit.site.model import load_site

ROOT = Path(__file__).resolve().parents[1]
DIR = "/run/slurmkit-devcluster"  # DEVCLUSTER_DIR's default, which the site config names


def exports() -> dict[str, str]:
    text = (ROOT / "contrib" / "devcluster" / "hook-settings.in").read_text().replace("@DIR@", DIR)
    return dict(re.findall(r"^(SK_[A-Z_]+)=(.*)$", text, re.M))


def test_hook_wrapper_agrees_with_the_site_config():
    acc = load_site(ROOT / "site_config" / "devcluster.yaml").accounting
    cfg = NodeConfig.from_env(exports())
    assert cfg.problems == []
    assert cfg.spool_dir == acc.spool_dir
    assert cfg.interval_s == acc.sample_interval_s
    assert cfg.source == acc.metric_source == "simulated"  # pretend GPUs: never anything that looks measured
    assert cfg.transport == acc.transport
    assert cfg.trace == acc.simulated_trace
    assert cfg.state_dir == acc.state_dir  # where `sk admin notify idle` reads the live readings

