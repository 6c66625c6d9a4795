"""Validated specs and site configs remembered per user (slurmkit/config/cache.py): a hit is exactly what
validating again would give, an edit is always seen, failures are never remembered, an untrusted or broken
cache is not used, and a repeated render needs neither pydantic nor PyYAML."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit import inputs, spec
from slurmkit.config import cache as configcache
from slurmkit.config.modeldata import plain_copy
from slurmkit.errors import SpecError
from slurmkit.site import model as site

ROOT = Path(__file__).resolve().parents[1]
DGX = ROOT / "site_config" / "dgx-a100.yaml"
EXAMPLE = ROOT / "examples" / "torchrun-2node.yaml"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "slurmkit" / "validated"


def _entries(cache: Path) -> list[Path]:
    return [p for p in cache.iterdir() if not p.name.startswith(".")] if cache.is_dir() else []


def _no_validation(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("validated again although the result is remembered")

    monkeypatch.setattr(site, "site_from_source", refuse)
    monkeypatch.setattr(spec, "spec_from_source", refuse)


def test_a_second_load_is_the_remembered_result_without_validating(private_cache, monkeypatch):
    first_site = inputs.load_site(DGX)
    first_spec, first_src = inputs.read_spec(str(EXAMPLE)).validate()
    assert first_site == plain_copy(site.load_site(DGX)) and first_spec == plain_copy(spec.load_spec(str(EXAMPLE))[0])
    assert len(_entries(private_cache)) == 2
    _no_validation(monkeypatch)
    again_site = inputs.load_site(DGX)
    again_spec, again_src = inputs.read_spec(str(EXAMPLE)).validate()
    assert again_site == first_site and again_site.source_file == str(DGX)
    assert again_spec == first_spec and again_src.lines == first_src.lines and again_src.file == str(EXAMPLE)


def test_an_edit_is_seen_even_with_the_same_size_and_mtime(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: aaaa\ncommand: [x]\n")
    stamp = path.stat().st_mtime_ns
    assert inputs.read_spec(str(path)).validate()[0].name == "aaaa"
    path.write_text("name: bbbb\ncommand: [x]\n")
    os.utime(path, ns=(stamp, stamp))
    assert inputs.read_spec(str(path)).validate()[0].name == "bbbb"


def test_failures_are_not_remembered_and_give_the_same_message(tmp_path, private_cache):
    path = tmp_path / "bad.yaml"
    path.write_text("name: t\ncommand: [x]\nnodez: 2\n")
    messages = []
    for _ in range(2):
        with pytest.raises(SpecError) as exc:
            inputs.read_spec(str(path)).validate()
        messages.append(exc.value.format())
    assert messages[0] == messages[1] and "did you mean 'nodes'" in messages[0]
    assert _entries(private_cache) == []


def test_overrides_are_part_of_the_key_and_data_is_what_the_file_says(tmp_path, monkeypatch):
    for attempt in range(2):
        f = inputs.read_spec(str(EXAMPLE), ["name=other", "nodes=3"])
        assert f.data["name"] == "llm-pretrain" and f.data["nodes"] == 2  # before --set
        job, src = f.validate()
        assert (job.name, job.nodes) == ("other", 3) and src.data["nodes"] == 3
        if attempt == 0:
            _no_validation(monkeypatch)
    assert inputs.read_spec(str(EXAMPLE), ["nodes=4"]).data["nodes"] == 2


def test_another_code_version_does_not_see_old_entries(monkeypatch):
    inputs.load_site(DGX)
    monkeypatch.setattr(configcache, "_code_version", lambda: b"some other slurmkit")
    calls = []
    real = site.site_from_source
    monkeypatch.setattr(site, "site_from_source", lambda src: calls.append(src) or real(src))
    inputs.load_site(DGX)
    assert len(calls) == 1


def test_a_broken_entry_is_a_miss_and_is_replaced(private_cache):
    expected = inputs.load_site(DGX)
    (entry,) = _entries(private_cache)
    entry.write_bytes(b"not a pickle")
    assert inputs.load_site(DGX) == expected
    assert entry.read_bytes() != b"not a pickle"


def test_a_cache_others_can_write_is_not_used(private_cache, monkeypatch):
    inputs.load_site(DGX)
    private_cache.chmod(0o777)
    calls = []
    real = site.site_from_source
    monkeypatch.setattr(site, "site_from_source", lambda src: calls.append(src) or real(src))
    inputs.load_site(DGX)
    assert len(calls) == 1


def test_the_least_recently_used_entries_go_when_there_are_too_many(private_cache, monkeypatch):
    monkeypatch.setattr(configcache, "MAX_ENTRIES", 4)
    keys = [configcache.key("test", str(i)) for i in range(5)]
    now = time.time()
    for i, k in enumerate(keys[:4]):
        configcache.put(k, i)
        os.utime(private_cache / k, (now - 4 * 3600 + i * 3600,) * 2)  # written 4, 3, 2, 1 hours ago
    assert configcache.get(keys[0]) == 0  # used now
    configcache.put(keys[4], 4)  # one too many: down to 3
    assert [configcache.get(k) for k in keys] == [0, None, None, 3, 4]


def test_a_repeated_render_imports_neither_pydantic_nor_pyyaml_nor_click(tmp_path):
    sk = str(Path(sys.executable).parent / "sk")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cmd = [sk, "render", str(EXAMPLE), "--site", str(DGX)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-X", "importtime", *cmd], capture_output=True, text=True, env=env)
    assert again.returncode == 0 and again.stdout == first.stdout
    imported = {line.split("|")[-1].strip() for line in again.stderr.splitlines() if line.startswith("import time")}
    assert "slurmkit.render" in imported
    assert not {"pydantic", "yaml", "click", "importlib.metadata"} & imported
