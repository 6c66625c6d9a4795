"""Values that reach the script come back exactly and run nothing (property tests through a real bash)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slurmkit.config.source import loads
from slurmkit.errors import RenderError, SpecError
from slurmkit.plan import make_plan
from slurmkit.quoting import q, sbatch_value, word_with_params
from slurmkit.render import render
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]

NASTY = ["a b", "it's", 'say "hi"', "$(touch /tmp/sk-pwned)", "`id`", "a;b", "#x", "ünï €", "$HOME", "*", "=x",
         "\\", "\t", "-n"]
# Any text without NUL (bash strings cannot hold NUL bytes).
text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40)


def bash_echo(words: str) -> str:
    out = subprocess.run(["bash", "-c", f"printf '%s\\0' {words}"], capture_output=True, check=True)
    return out.stdout.decode()


@settings(max_examples=60, deadline=None)
@given(text)
def test_q_round_trips_any_text_through_bash(value):
    assert bash_echo(q(value)) == value + "\0"


@settings(max_examples=40, deadline=None)
@given(text.filter(lambda s: "{" not in s and "}" not in s), text)
def test_sweep_parameter_words_expand_to_the_value_without_reinterpretation(prefix, param):
    word = word_with_params(prefix + "{p}", {"p"})
    out = subprocess.run(["bash", "-c", f"printf '%s' {word}"], capture_output=True, check=True,
                         env={"SK_PARAM_p": param, "PATH": "/usr/bin:/bin"})
    assert out.stdout.decode() == prefix + param


def slurm_get_argument(line: str) -> list[str]:
    """Slurm's #SBATCH argument splitting (src/sbatch/opt.c _get_argument), transcribed for the test oracle."""
    args, cur, i, quote, have = [], "", 0, None, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            cur += line[i + 1]
            i += 2
            have = True
            continue
        if quote:
            if c == quote:
                quote = None
            else:
                cur += c
        elif c in "\"'":
            quote, have = c, True
        elif c == "#":
            break
        elif c in " \t\n\v\f\r":  # C isspace()
            if have or cur:
                args.append(cur)
            cur, have = "", False
        else:
            cur += c
            have = True
        i += 1
    if have or cur:
        args.append(cur)
    return args


@settings(max_examples=100, deadline=None)
@given(text.filter(lambda s: "\n" not in s and "\r" not in s))
def test_sbatch_value_is_read_back_as_one_exact_argument(value):
    assert slurm_get_argument("--job-name=" + sbatch_value(value, "job-name")) == ["--job-name=" + value]


def test_newline_in_an_sbatch_value_is_rejected_with_the_key():
    with pytest.raises(RenderError) as err:
        sbatch_value("a\nb", "output")
    assert "--output" in err.value.format() and "line break" in err.value.format()


def test_newline_in_a_spec_name_is_rejected_at_validation():
    with pytest.raises(SpecError) as err:
        spec_from_source(loads('name: "a\\nb"\ncommand: [x]\n', "t.yaml"))
    assert "name" in err.value.format() and "single line" in err.value.format()


def test_rendered_script_passes_values_through_exactly_and_runs_nothing(tmp_path):
    marker = tmp_path / "pwned"
    args = [*NASTY, f"$(touch {marker})", f"`touch {marker}`"]
    env = {f"V{i}": v for i, v in enumerate(NASTY)}
    import json

    spec_text = json.dumps({"name": "q$(touch " + str(marker) + ")", "launcher": "none", "gpus_per_node": 1,
                            "command": ["printf", "%s\\0", *args, *[f"${k}" for k in env]], "env": env,
                            "output": "out dir/#x.out"})
    src = loads(spec_text, "t.yaml")
    script = render(make_plan(spec_from_source(src), load_site(ROOT / "site_config" / "devcluster.yaml"), src))
    run = subprocess.run(["bash", "-c", script], capture_output=True, env={"PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    # The command's arguments come back exactly; "$V0" etc. are literal (commands are never run by a shell).
    assert run.stdout.decode().split("\0")[:-1] == [*args, *[f"${k}" for k in env]]
    assert not marker.exists()
    # The env values are exported exactly.
    check = subprocess.run(["bash", "-c", script.replace("\nprintf", "\nenv -0 #"), ], capture_output=True,
                           env={"PATH": "/usr/bin:/bin"})
    exported = dict(kv.split("=", 1) for kv in check.stdout.decode().split("\0") if "=" in kv)
    assert {k: exported[k] for k in env} == env
    assert not marker.exists()
