"""contrib/slurm/sk-hook (the shell wrapper Slurm runs) and install-hooks: the hook log is never world-readable."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _wrapper(tmp_path: Path, env_file: str) -> Path:
    """A copy of the wrapper as install-hooks writes it (its settings file rewritten), called as sk-jobcomp."""
    text = (ROOT / "contrib/slurm/sk-hook").read_text()
    text = text.replace("SK_HOOK_ENV=/etc/slurmkit/hook.env", f"SK_HOOK_ENV={env_file}")
    path = tmp_path / "sk-jobcomp"
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_wrapper_creates_its_log_0600_whatever_the_umask(tmp_path):
    env_file = tmp_path / "hook.env"
    log = tmp_path / "log" / "hooks.log"
    log.parent.mkdir()
    # SK_BIN names a failing program, so the wrapper writes a line about it into the log
    env_file.write_text(f"SK_HOOK_LOG={log}\nSK_BIN=/bin/false\n")
    res = subprocess.run(["sh", "-c", f"umask 022 && exec {_wrapper(tmp_path, str(env_file))}"],
                         env={"PATH": "/usr/bin:/bin", "JOBID": "7"}, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert stat.S_IMODE(os.stat(log).st_mode) == 0o600
    assert "sk hook jobcomp exited 1 (job 7)" in log.read_text()
