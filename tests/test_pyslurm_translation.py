"""Pure translation from sbatch options to pyslurm JobSubmitDescription keywords (no pyslurm, no Slurm).

What Slurm makes of them is tested with the real pyslurm on the devcluster
(tests/integration/test_pyslurm_on_devcluster.py); these only pin the translation rules that exist because
pyslurm 25.11.2 differs from sbatch.
"""

from __future__ import annotations

import pytest

from slurmkit.backends.pyslurm import _series, description_kwargs, signal_dict
from slurmkit.errors import InputError
from slurmkit.request import SubmitRequest


def _req(**options) -> SubmitRequest:
    return SubmitRequest(name="j", script="#!/bin/bash\ntrue\n", options=options, tag="t1", workdir="/w")


def test_signal_becomes_the_dict_form_pyslurm_parses():
    # pyslurm's own string parser refuses "USR1" (it wants "SIGUSR1"), so the backend passes the dict form
    assert signal_dict("B:USR1@60") == {"signal": 10, "time": 60, "batch_only": True}
    assert signal_dict("USR2") == {"signal": 12, "time": 60}
    assert signal_dict("R:15@5") == {"signal": 15, "time": 5, "allow_reservation_overlap": True}


def test_ntasks_is_derived_like_sbatch_does():
    assert description_kwargs(_req(nodes="2", **{"ntasks-per-node": "8"}))["ntasks"] == 16
    assert description_kwargs(_req(nodes="2", ntasks="3", **{"ntasks-per-node": "8"}))["ntasks"] == 3


def test_environment_is_always_an_explicit_dict_without_slurm_variables():
    kw = description_kwargs(_req(), environ={"HOME": "/h", "SLURM_JOB_ID": "9"})
    assert kw["environment"] == {"HOME": "/h"}
    assert kw["comment"] == "sk:t1" and kw["working_directory"] == "/w"


def test_gpus_per_node_with_type_and_flags():
    kw = description_kwargs(_req(**{"gpus-per-node": "a100:8", "exclusive": None, "requeue": None,
                                    "array": "0-19%5", "dependency": "afterok:1"}))
    assert (kw["gres_per_node"], kw["resource_sharing"], kw["is_requeueable"]) == ("gpu:a100:8", "exclusive", True)
    assert (kw["array"], kw["dependencies"]) == ("0-19%5", "afterok:1")


def test_an_option_without_an_attribute_or_a_bad_signal_is_a_located_error():
    with pytest.raises(InputError, match="--no-such-option"):
        description_kwargs(_req(**{"no-such-option": "1"}))
    with pytest.raises(InputError, match="--signal"):
        description_kwargs(_req(signal="B:NOPE@60"))


def test_series():
    assert _series("slurm 25.11.7") == _series("25.11.2") == (25, 11)
    assert _series("24.5.1") == (24, 5)


def test_detect_never_imports_a_pyslurm_of_another_slurm_series():
    """libslurm exits the importing process on a config of another release (CI died that way on 22.05)."""
    from slurmkit.backends.pyslurm import detect

    imported: list[str] = []

    def must_not_import(name):
        imported.append(name)
        raise SystemExit(1)

    d = detect(find_spec=lambda name: object(), import_module=must_not_import,
               installed_version=lambda name: "25.11.2", slurm_version=lambda: "slurm-wlm 22.05.8")
    assert not d.usable and imported == []
    assert "built for Slurm 25.11" in d.reason and "22.05.8" in d.reason

    d = detect(find_spec=lambda name: object(), import_module=lambda name: imported.append(name),
               installed_version=lambda name: "25.11.2", slurm_version=lambda: "slurm 25.11.7")
    assert d.usable and imported == ["pyslurm"]
