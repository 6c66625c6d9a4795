"""Hostile spec and site files end in one located error and exit 2, fast: alias bombs, devices, FIFOs, deep
nesting, unreadable scalars; and the bounded loader reads ordinary YAML exactly as PyYAML does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmkit.config import source
from slurmkit.config.source import loads
from slurmkit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
SITE = str(ROOT / "site_config" / "devcluster.yaml")
SPEC = str(ROOT / "examples" / "single-gpu.yaml")


def alias_bomb(width: int = 9, depth: int = 10) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    return "\n".join(lines) + "\nname: x\ncommand: [x]\n"


def merge_bomb(width: int = 10, depth: int = 30) -> str:
    lines = ["m0: &m0 {k0: 1}"]
    lines += [f"m{i}: &m{i} {{<<: [{', '.join([f'*m{i - 1}'] * width)}], k{i}: 1}}" for i in range(1, depth)]
    return "\n".join(lines) + "\nname: x\ncommand: [x]\n"


def sk_render(spec: str, site: str = SITE) -> subprocess.CompletedProcess:
    # The timeout is the test: before the bounds, these ran until killed or hung on the FIFO.
    return subprocess.run([SK, "render", spec, "--site", site], capture_output=True, text=True, timeout=30)


def assert_one_error(run: subprocess.CompletedProcess, file: str, fragment: str) -> None:
    assert run.returncode == 2, run.stderr
    first = run.stderr.splitlines()[0]
    assert first.startswith(f"{file}") and fragment in first, run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(("text", "fragment"), [
    (alias_bomb(), "expands to more than"),
    (merge_bomb(), "expands to more than"),
    ("a: &a [1, *a]\n", "refers to the mapping or list that contains it"),
    ("a: &a {b: *a}\n", "refers to the mapping or list that contains it"),
    ("a: " + "[" * 5000 + "]" * 5000 + "\n", "nest"),
    ("nodes: " + "9" * 5000 + "\n", "cannot read the value"),
    ("begin: 2024-13-45\n", "cannot read the value"),
])
@pytest.mark.parametrize("role", ["spec", "site"])
def test_hostile_yaml_is_one_located_error_with_exit_2(tmp_path, text, fragment, role):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    run = sk_render(str(bad)) if role == "spec" else sk_render(SPEC, str(bad))
    assert_one_error(run, str(bad), fragment)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_device_as_spec_or_site_is_refused_without_reading_it(device):
    assert_one_error(sk_render(device), device, "is a device")
    assert_one_error(sk_render(SPEC, device), device, "is a device")


def test_a_fifo_without_a_writer_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "spec.yaml"
    os.mkfifo(fifo)
    assert_one_error(sk_render(str(fifo)), str(fifo), "is a FIFO")
    assert_one_error(sk_render(SPEC, str(fifo)), str(fifo), "is a FIFO")


def test_a_file_over_the_limit_is_refused_after_reading_at_most_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(source, "MAX_BYTES", 1000)
    big = tmp_path / "big.yaml"
    big.write_text("a: 1\n" * 201)
    with pytest.raises(InputError, match="larger than 1000 bytes"):
        source.read_text(big)
    big.write_text("a: 1\n" * 200)
    assert source.read_text(big) == "a: 1\n" * 200


def test_the_alias_bound_is_on_expanded_values_not_on_aliases():
    # 9**5 = 59049 values pass; 9**6 do not; the error names the key where the expansion crossed the bound.
    assert len(loads(alias_bomb(depth=5)).data["l4"]) == 9
    with pytest.raises(InputError) as err:
        loads(alias_bomb(depth=6))
    assert "more than 100000 values" in err.value.format() and "l5" in err.value.format()


def test_merge_keys_add_what_the_mapping_does_not_set_and_keep_lines():
    src = loads("d: &d {a: 1, b: 2}\ne: &e {b: 3, c: 4}\nx:\n  <<: [*d, *e]\n  a: 9\n")
    assert src.data["x"] == yaml.safe_load("d: &d {a: 1, b: 2}\ne: &e {b: 3, c: 4}\nx:\n  <<: [*d, *e]\n  a: 9\n")["x"]
    assert src.line_of(("x", "a")) == 5 and src.line_of(("x", "b")) == 1 and src.line_of(("x", "c")) == 2


scalars = st.one_of(st.integers(-10**6, 10**6), st.text(max_size=8), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False))
documents = st.dictionaries(st.text(min_size=1, max_size=6), st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=6), inner,
                                                                         max_size=4), max_leaves=20),
    min_size=1, max_size=5)


@settings(max_examples=100, deadline=None)
@given(documents, st.sampled_from(["block", "flow", "anchors"]))
def test_ordinary_documents_read_exactly_as_pyyaml_reads_them(doc, style):
    text = yaml.safe_dump(doc, default_flow_style=style == "flow", allow_unicode=True)
    if style == "anchors":  # the same value twice: PyYAML's dumper writes an anchor and an alias
        shared = next(iter(doc.values()))
        text = yaml.safe_dump({"first": shared, "again": shared, **doc})
    assert loads(text).data == yaml.safe_load(text)
