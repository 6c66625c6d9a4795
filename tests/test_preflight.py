"""sk validate warns about a workdir, output directory or script that does not exist where the spec is checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
SITE = str(ROOT / "site_config" / "devcluster.yaml")
SPEC = """name: p
launcher: srun
gpus_per_node: 1
time: "00:05:00"
output: logs/%x-%j.out
command: [python, train.py, --lr, "{lr}"]
array: {grid: {lr: [1, 2]}}
"""


def _validate(cwd: Path, text: str) -> subprocess.CompletedProcess:
    (cwd / "job.yaml").write_text(text)
    return subprocess.run([SK, "validate", "job.yaml", "--site", SITE], cwd=cwd, capture_output=True, text=True)


def test_missing_output_directory_and_script_are_warnings_with_their_lines(tmp_path):
    res = _validate(tmp_path, SPEC)
    assert res.returncode == 0, res.stderr  # warnings: the paths may exist only on the nodes
    assert f"job.yaml:5: warning: output: the directory {tmp_path}/logs does not exist here" in res.stderr
    assert f"job.yaml:6: warning: command: train.py does not exist in {tmp_path}" in res.stderr


def test_no_warning_once_they_exist(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "train.py").touch()
    res = _validate(tmp_path, SPEC)
    assert res.returncode == 0 and "warning" not in res.stderr, res.stderr


def test_a_missing_workdir_is_the_one_warning(tmp_path):
    res = _validate(tmp_path, SPEC + f"workdir: {tmp_path}/nope\n")
    assert res.stderr.count("warning") == 1 and f"workdir: {tmp_path}/nope does not exist here" in res.stderr
