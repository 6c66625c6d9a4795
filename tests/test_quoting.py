"""Values that reach the script come back exactly and run nothing (property tests through a real bash)."""

from __future__ import annotations

import subprocess

import pytest
import yaml
from hypothesis import example, given, settings
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


C_ISSPACE = b" \t\n\v\f\r"  # isspace() in the C locale (sbatch never calls setlocale)


class SbatchFatal(Exception):
    """What sbatch's fatal() in get_argument would have printed (it exits)."""


def slurm_get_argument(line: bytes, version: str) -> tuple[bytes | None, int]:
    """sbatch's get_argument(), transcribed: one argument of an #SBATCH line and how many bytes it used.

    Slurm 25.11.7 src/sbatch/opt.c lines 473-556; 22.05.8 (tag slurm-22-05-8-1) lines 459-531. The only
    difference is the backslash branch: 25.11 copies an escaped space at once (lines 512-520), 22.05 only sets
    escape_flag, so the escaped space ends the argument at the loop condition.
    """
    ptr = 0
    n = len(line)

    def at(i: int) -> int:
        return line[i] if i < n else 0  # C strings end in NUL

    while at(ptr) and at(ptr) in C_ISSPACE:
        ptr += 1
    for word in (b"packjob", b"hetjob"):  # het job separators are blanked out
        end = ptr + len(word)
        if line[ptr:end].lower() == word and (at(end) == 0 or at(end) in C_ISSPACE):
            line = line[:ptr] + b" " * len(word) + line[end:]
    if at(ptr) == ord(":"):
        raise SbatchFatal("Unexpected `:`")
    if at(ptr) == 0:
        return None, ptr
    arg = bytearray()
    escape = quoted = False
    q_char = 0
    while (quoted or at(ptr) not in C_ISSPACE) and at(ptr) != ord("\n") and at(ptr) != 0:
        c = at(ptr)
        if escape:
            escape = False
        elif c == ord("\\"):
            ptr += 1
            if version == "25.11" and at(ptr) == ord(" "):
                arg.append(at(ptr))
                ptr += 1
            else:
                escape = True
            continue
        elif quoted:
            if c == q_char:
                quoted = False
                ptr += 1
                continue
        elif c in (ord('"'), ord("'")):
            quoted, q_char = True, c
            ptr += 1
            continue
        elif c == ord("#"):
            break
        arg.append(at(ptr))
        ptr += 1
    if quoted:
        raise SbatchFatal(f"Unmatched `{chr(q_char)}`")
    # get_argument returns NULL when nothing was copied (argument stays NULL), e.g. for a lone '#' or `""`
    return (bytes(arg) if arg else None), ptr


def sbatch_directives(script: str, version: str = "25.11") -> list[str]:
    """The argv sbatch builds from a script's directives: _opt_batch_script (25.11.7 opt.c lines 565-647).

    Lines are split at '\n' (next_line, lines 437-459); a line starting with #SBATCH is parsed, other comment
    or blank lines are skipped, and the first other line ends the scan.
    """
    argv: list[str] = []
    for line in script.encode().split(b"\n"):
        if line.startswith(b"#SBATCH"):
            ptr = line[len(b"#SBATCH"):]
        else:
            rest = line.lstrip(C_ISSPACE)
            if rest and not rest.startswith(b"#"):
                break
            continue
        while True:
            arg, used = slurm_get_argument(ptr, version)
            if arg is None:
                break
            argv.append(arg.decode())
            ptr = ptr[used:]
    return argv


VERSIONS = ["22.05", "25.11"]
# Any single-line text: every character but LF and NUL, including \t \v \f \r, quotes, backslashes, unicode.
line_text = st.text(st.characters(blacklist_characters="\x00\n", blacklist_categories=("Cs",)), max_size=40)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=300, deadline=None)
@given(value=line_text)
def test_sbatch_value_is_read_back_as_one_exact_argument_by_both_parsers(version, value):
    line = "#SBATCH --job-name=" + sbatch_value(value, "job-name")
    assert sbatch_directives(line, version) == ["--job-name=" + value]


@pytest.mark.parametrize(("version", "value", "argv"), [
    # What the per-character backslash escaping of earlier releases produced, and what sbatch made of it.
    ("22.05", r"x\ y", ["--job-name=x", "y"]),
    ("25.11", r"x\ y", ["--job-name=x y"]),
    ("22.05", r"a\ --exclusive\ --gpus-per-task=1", ["--job-name=a", "--exclusive", "--gpus-per-task=1"]),
    ("25.11", "a\\\vb", ["--job-name=a", "b"]),
    ("25.11", "a\\\tb", ["--job-name=a", "b"]),
])
def test_the_transcribed_parsers_reproduce_the_old_escaping_bugs(version, value, argv):
    assert sbatch_directives("#SBATCH --job-name=" + value, version) == argv


def test_the_transcription_stops_at_the_first_command_and_skips_comments():
    script = "#!/bin/bash\n#SBATCH -N 2 # two nodes\n\n# note\n#SBATCH --x='a b'\nset -e\n#SBATCH --late\n"
    assert sbatch_directives(script) == ["-N", "2", "--x=a b"]
    with pytest.raises(SbatchFatal):
        sbatch_directives('#SBATCH --job-name="open')


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


# Values a spec accepts in the single-line fields that become #SBATCH options (no control character but tab).
# The characters sbatch's parser treats specially are drawn often, the rest from all of unicode.
field_text = st.text(st.one_of(st.sampled_from(' \t"\'\\#=:-'),
                               st.characters(blacklist_categories=("Cs", "Cc", "Cn"))),
                     min_size=1, max_size=30).filter(lambda s: s.strip())
DEVSITE = ROOT / "site_config" / "devcluster.yaml"


def planned_argv(plan) -> list[str]:
    return [f"--{k}" if v is None else f"--{k}={v}" for k, v in plan.sbatch.items()]


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@example(name="x y\tz", workdir="/scratch/my project", output="#o \"q\" \\", user="a\tb",
         constraint="c d")
@given(name=field_text, workdir=field_text, output=field_text, user=field_text, constraint=field_text)
def test_every_sbatch_option_of_a_rendered_script_is_read_back_as_planned(version, name, workdir, output, user,
                                                                           constraint):

    spec = {"name": name, "launcher": "none", "gpus_per_node": 1, "command": ["true"], "workdir": workdir,
            "output": output, "error": output + ".err", "mail": {"user": user},
            "sbatch_extra": {"constraint": constraint, "hold": None}}
    src = loads(yaml.safe_dump(spec, allow_unicode=True), "t.yaml")
    plan = make_plan(spec_from_source(src), load_site(DEVSITE), src)
    assert sbatch_directives(render(plan), version) == planned_argv(plan)


def test_a_name_with_options_in_it_stays_one_job_name_option():
    src = loads('name: "a --exclusive --gpus-per-task=1"\nlauncher: none\ngpus_per_node: 1\ncommand: [x]\n', "t")
    plan = make_plan(spec_from_source(src), load_site(DEVSITE), src)
    for version in VERSIONS:
        argv = sbatch_directives(render(plan), version)
        assert "--job-name=a --exclusive --gpus-per-task=1" in argv
        assert not {"--exclusive", "--gpus-per-task=1"} & set(argv)
