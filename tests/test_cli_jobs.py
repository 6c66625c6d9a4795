"""`sk validate/render/submit --dry-run` as a user meets them: messages, exit status, no tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DGX = str(ROOT / "site_config" / "dgx-a100.yaml")
SK = [str(Path(sys.executable).parent / "sk")]


def sk(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SK, *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize(("content", "fragments"), [
    ("", ["the file is empty"]),
    ("name: [unclosed\n", ["malformed YAML", ":2"]),
    ("- a\n- b\n", ["expected a mapping"]),
    ("name: t\ncommand: [x]\nnodez: 2\n", [":3", "nodez", "unknown key", "did you mean 'nodes'"]),
    ("name: t\ncommand: [x]\ngpus_per_node: two\n", [":3", "gpus_per_node", "valid integer"]),
    ("name: t\ncommand: [x]\ntime: forever\n", [":3", "time", "not a Slurm time"]),
    ("name: t\n", ["command", "required key is missing"]),
    ("name: t\ncommand: [x]\nname: u\n", [":3", "duplicate key"]),
])
def test_bad_spec_gives_located_message_exit_2_and_no_traceback(tmp_path, content, fragments):
    spec = tmp_path / "bad.yaml"
    spec.write_text(content)
    run = sk("validate", str(spec), "--site", DGX)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    for f in fragments:
        assert f in run.stderr, run.stderr
    assert str(spec) in run.stderr


def test_binary_and_huge_and_missing_files(tmp_path):
    (tmp_path / "bin.yaml").write_bytes(b"\x7fELF\x00\x01")
    (tmp_path / "huge.yaml").write_text("a: 1\n" * 300_000)
    for name, fragment in [("bin.yaml", "binary file"), ("huge.yaml", "must be under"), ("nope.yaml", "no such file")]:
        run = sk("validate", str(tmp_path / name), "--site", DGX)
        assert run.returncode == 2 and fragment in run.stderr and "Traceback" not in run.stderr


def test_site_lookup_order_env_then_explicit(tmp_path):
    ex = str(ROOT / "examples" / "single-gpu.yaml")
    run = sk("render", ex, env={"SK_SITE": DGX, "HOME": str(tmp_path)})
    assert run.returncode == 0 and "#SBATCH --partition=gpu" in run.stdout
    run = sk("render", ex, env={"SK_SITE": "", "HOME": str(tmp_path)})
    if not Path("/etc/slurmkit/site.yaml").exists():
        assert run.returncode == 2 and "no site configuration found" in run.stderr
    run = sk("render", ex, "--site", str(tmp_path / "missing.yaml"))
    assert run.returncode == 2 and "does not exist" in run.stderr


def test_set_overrides_win_over_the_spec_and_are_validated():
    ex = str(ROOT / "examples" / "torchrun-2node.yaml")
    run = sk("render", ex, "--site", DGX, "--set", "nodes=4", "--set", "nccl.debug=INFO")
    assert "#SBATCH --nodes=4" in run.stdout and "export NCCL_DEBUG=INFO" in run.stdout
    run = sk("render", ex, "--site", DGX, "--set", "nodes=many")
    assert run.returncode == 2 and "nodes" in run.stderr


def test_render_explain_is_json_with_the_decisions():
    run = sk("render", str(ROOT / "examples" / "torchrun-2node.yaml"), "--site", DGX, "--explain")
    data = json.loads(run.stdout)
    assert data["launcher"] == "torchrun" and data["tasks_per_node"] == 1 and data["world_size"] == 16
    assert "one rank per GPU" in data["launcher_explanation"] and data["topology"][0]["numa"] == 3


def test_nccl_lint_runs_in_validate_with_suggestion(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: t\ncommand: [x]\nnccl:\n  env:\n    NCCL_TOPO: ring\n    NCCL_IB_TIMEOUT: 18\n")
    run = sk("validate", str(spec), "--site", DGX)
    assert run.returncode == 2
    assert ":5: error: nccl.env.NCCL_TOPO" in run.stderr and "NCCL_ALGO" in run.stderr
    assert "warning: nccl.env.NCCL_IB_TIMEOUT" in run.stderr


def test_sweep_task_lookup_in_the_script_matches_the_spec(tmp_path):
    from slurmkit.spec import load_spec

    ex = ROOT / "examples" / "sweep.yaml"
    spec, _ = load_spec(str(ex))
    script = sk("render", str(ex), "--site", DGX).stdout
    assert "#SBATCH --array=0-11%4" in script
    probe = script.replace("\npython ", "\nprintf '%s\\n' ")
    for i in range(spec.array.size):
        out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                             env={"SLURM_ARRAY_TASK_ID": str(i), "PATH": os.environ["PATH"]}).stdout.split("\n")
        p = spec.array.task(i)
        assert out[1] == f"--lr={p['lr']}" and out[3] == str(p["seed"]), (i, out)


def test_dry_run_prints_script_and_submission_command():
    run = sk("submit", str(ROOT / "examples" / "single-gpu.yaml"), "--site", DGX, "--dry-run", "--backend", "cli")
    assert run.returncode == 0, run.stderr
    assert "sbatch" in run.stdout and "#SBATCH --job-name=notebook-eval" in run.stdout


def test_site_templates_override_builtin_ones_and_are_listed(tmp_path):
    import yaml

    site = yaml.safe_load(Path(DGX).read_text())
    site["templates_dir"] = "templates"
    (tmp_path / "templates" / "launchers").mkdir(parents=True)
    (tmp_path / "templates" / "launchers" / "none.sh.j2").write_text(
        "# site launcher for {{ plan.partition_name }}\n{{ run }}site-wrapper {{ command|words }}\n")
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    run = sk("render", str(ROOT / "examples" / "single-gpu.yaml"), "--site", str(tmp_path / "site.yaml"))
    assert run.returncode == 0, run.stderr
    assert "\nsite-wrapper python eval.py --checkpoint ckpt/latest.pt\n" in run.stdout
    listing = sk("templates", "--site", str(tmp_path / "site.yaml")).stdout
    assert "launchers/none.sh.j2" in listing and "site (overrides built-in)" in listing


def test_template_bytecode_cache_is_private_and_an_edited_template_is_recompiled(tmp_path):
    import yaml

    site = yaml.safe_load(Path(DGX).read_text())
    site["templates_dir"] = "templates"
    launcher = tmp_path / "templates" / "launchers" / "none.sh.j2"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("{{ run }}first-wrapper {{ command|words }}\n")
    (tmp_path / "site.yaml").write_text(yaml.safe_dump(site))
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    args = ("render", str(ROOT / "examples" / "single-gpu.yaml"), "--site", str(tmp_path / "site.yaml"))
    first = sk(*args, env=env)
    assert first.returncode == 0, first.stderr and "first-wrapper" in first.stdout
    (cache,) = (tmp_path / "cache" / "slurmkit").glob("jinja-*")
    assert cache.stat().st_mode & 0o777 == 0o700 and any(cache.iterdir())
    assert sk(*args, env=env).stdout == first.stdout  # from the cache: the same script
    launcher.write_text("{{ run }}second-wrapper {{ command|words }}\n")
    again = sk(*args, env=env)
    assert "second-wrapper" in again.stdout and "first-wrapper" not in again.stdout
    cache.chmod(0o777)  # a cache others could write is never loaded (loading bytecode runs it)
    for f in cache.iterdir():
        f.write_bytes(b"garbage")
    assert sk(*args, env=env).stdout == again.stdout


@pytest.mark.parametrize("command", ["wait", "logs", "status", "cancel"])
@pytest.mark.parametrize("job_id", ["abc", "12_x", "1;rm -rf /", "-5"])
def test_malformed_job_id_is_a_usage_error_before_slurm_is_asked(command, job_id):
    run = sk(command, "--", job_id)
    assert run.returncode == 2, run.stderr
    assert "is not a Slurm job id" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(("written", "sbatch"), [("12:00:00", "12:00:00"), ("1:30:00", "01:30:00"),
                                                ("90", "01:30:00"), ("1-00:00:00", "1-00:00:00")])
def test_unquoted_slurm_time_is_read_as_written_not_as_a_base60_number(tmp_path, written, sbatch):
    spec = tmp_path / "t.yaml"
    spec.write_text(f"name: t\nlauncher: none\ngpus_per_node: 1\ncommand: [x]\ntime: {written}\n")
    run = sk("render", str(spec), "--site", DGX)
    assert run.returncode == 0, run.stderr
    assert f"#SBATCH --time={sbatch}\n" in run.stdout


@pytest.mark.integration
def test_site_in_a_directory_the_user_cannot_read_is_a_clear_error(tmp_path, devcluster):
    from tests.conftest import as_user

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "site.yaml").write_text(Path(DGX).read_text())
    spec = ROOT / "examples" / "single-gpu.yaml"
    site = str(private / "site.yaml")
    for named, env, how in (("--site", "SK_SITE=", ["--site", site]), ("$SK_SITE", f"SK_SITE={site}", [])):
        run = as_user("alice", ["env", env, *SK, "render", str(spec), *how])
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
        assert f"site config given by {named} cannot be read: permission denied" in run.stderr
