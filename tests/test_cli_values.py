"""Command-line values checked before any work: one time syntax for --since/--until, job ids, limits, the spool."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmkit.cli.main import cli
from slurmkit.config import when
from slurmkit.errors import InputError

NOW = datetime(2026, 12, 4, 17, 30, tzinfo=timezone.utc)
COMMANDS = [["status"], ["history"], ["report", "usage"], ["report", "efficiency"], ["report", "top"],
            ["report", "idle"], ["admin", "reconcile"], ["admin", "import-sacct"], ["admin", "notify", "idle"]]


@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW), ("90m", datetime(2026, 12, 4, 16, 0, tzinfo=timezone.utc)),
    ("7d", datetime(2026, 11, 27, 17, 30, tzinfo=timezone.utc)),
    ("30s", datetime(2026, 12, 4, 17, 29, 30, tzinfo=timezone.utc)),
    ("yesterday", datetime(2026, 12, 3, tzinfo=timezone.utc)),
    ("last-month", datetime(2026, 11, 1, tzinfo=timezone.utc)),
    ("2026-11-01T08:00+01:00", datetime(2026, 11, 1, 7, tzinfo=timezone.utc)),
    ("1796283710", datetime.fromtimestamp(1796283710, timezone.utc)),
])
def test_forms(text, expected):
    assert when.parse_when(text, tz=timezone.utc, now=NOW, option="--since") == expected


@pytest.mark.parametrize(("text", "why"), [("3650000d", "out of range"), ("1969-12-31T23:00", "before 1970"),
                                           ("2028-01-01", "more than a year ahead"), ("someday", "cannot read")])
def test_bounds_and_garbage_name_the_option(text, why):
    with pytest.raises(InputError) as err:
        when.parse_when(text, tz=timezone.utc, now=NOW, option="--until")
    assert err.value.format().startswith("error: --until: ") and why in err.value.format()


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_since_option_reads_the_one_syntax(command, tmp_path):
    """Each command refuses the same bad value with the same one-line error and exit 2, before doing any work,
    and its --help lists the same forms."""
    runner = CliRunner()
    site = tmp_path / "nosuch.yaml"  # never read: the time is checked first or the site error would show
    for bad, why in (("someday", "cannot read 'someday' as a time"), ("999999d", "'999999d' is out of range")):
        res = runner.invoke(cli, [*command, "--since", bad], env={"SK_SITE": str(site)})
        assert res.exit_code == 2, (command, res.output)
        assert f"error: --since: {why}" in res.output and "Traceback" not in res.output, res.output
    help_text = " ".join(runner.invoke(cli, [*command, "--help"], terminal_width=400).output.split())
    assert " ".join(when.FORMS.split()) in help_text, help_text


@pytest.mark.parametrize("args", [["report", "job", "99999999999999999999999"], ["status", "0"],
                                  ["report", "top", "--limit", "-1"], ["report", "idle", "--limit", "0"]])
def test_out_of_range_ids_and_limits_are_usage_errors(args):
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "Traceback" not in res.output and "Invalid value" in res.output, res.output


@pytest.mark.parametrize("kind", ["devnull", "file", "link"])
def test_a_spool_that_is_not_a_directory_is_refused_before_any_work(kind, tmp_path):
    spool = {"devnull": "/dev/null", "file": str(tmp_path / "file"), "link": str(tmp_path / "link")}[kind]
    (tmp_path / "file").write_text("x")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    res = CliRunner().invoke(cli, ["admin", "ingest", "--spool", spool, "--store", str(tmp_path / "s.db")])
    assert res.exit_code == 2 and res.output.startswith(f"error: --spool: the spool {spool} is "), res.output
    assert not (tmp_path / "s.db").exists()


def test_status_lines_escape_control_characters_in_names_and_reasons():
    from slurmkit.cli.follow import _line
    from slurmkit.job import JobInfo

    j = JobInfo(job_id="7", name="a\x1b]0;t\x07", user="alice", state="PENDING", reason="x\rY", partition="gpu")
    line = _line("7", j, "PENDING", j.reason)
    assert "a\\x1b]0;t\\x07" in line and "x\\rY" in line and not any(c in line for c in "\x1b\x07\r")


def _spec(tmp_path, text: str, name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


GOOD = "name: ok\nlauncher: none\ngpus_per_node: 1\ntime: '00:05:00'\ncommand: [hostname]\n"
SITE = str(Path(__file__).resolve().parents[1] / "site_config" / "devcluster.yaml")


def test_validate_json_lists_every_problem_of_every_spec_and_exits_2(tmp_path):
    bad = _spec(tmp_path, "name: bad\nnodes: 0\ntim: 5\ncommand: [x]\n", "bad.yaml")
    good = _spec(tmp_path, GOOD)
    res = CliRunner().invoke(cli, ["validate", bad, good, "--site", SITE, "--json"])
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout)
    assert [r["ok"] for r in out] == [False, True]
    assert {(p["key"], p["line"]) for p in out[0]["problems"]} == {("nodes", 2), ("tim", 3)}


def test_an_error_in_a_set_value_names_the_set_argument_not_a_line(tmp_path):
    good = _spec(tmp_path, GOOD)
    res = CliRunner().invoke(cli, ["validate", good, "--site", SITE, "--set", "nodes=abc", "--set", "gpus_per_node=99"])
    assert res.exit_code == 2
    assert "--set nodes=abc: error: nodes: Input should be a valid integer" in res.output, res.output
    assert f"{good}:" not in res.output.split("\n")[0]
