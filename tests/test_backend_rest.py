"""The rest backend on recorded real slurmrestd 22.05 exchanges (tests/data/slurmrest/, see its README).

The JWT/HTTP path is exercised against a small local HTTP server that replays those recordings: Debian's 22.05
slurmrestd has no auth/jwt plugin, so a real JWT-authenticated daemon cannot exist here. The unix-socket path
against the real daemon is in tests/integration/test_rest_on_devcluster.py.
"""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from slurmkit.backends import get_backend
from slurmkit.backends.rest import (
    RestBackend,
    error_from,
    job_info,
    job_properties,
    offered_versions,
    submit_environment,
    submitted_job_id,
    tagged_job,
)
from slurmkit.errors import BackendUnavailable, InputError, JobNotFound
from slurmkit.request import SubmitRequest

DATA = Path(__file__).parent / "data" / "slurmrest"


def rec(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def openapi() -> dict:
    return json.loads(gzip.decompress((DATA / "openapi-v3.json.gz").read_bytes()))


def recorded_request(name: str, **extra) -> SubmitRequest:
    """The SubmitRequest record.py built for a recording (same options), with the recorded tag."""
    job = rec(name)["request"]["job"]
    options = {"job-name": job["name"], "partition": "gpu", "nodes": "1", "ntasks": "1", "gpus-per-node": "a100:1",
               "cpus-per-task": "1", "mem-per-gpu": "100M", "time": "00:02:00", "output": "%x-%j.out", **extra}
    return SubmitRequest(name=job["name"], script=rec(name)["request"]["script"], options=options,
                         tag=job["comment"].removeprefix("sk:"), workdir=job["current_working_directory"])


def test_versions_offered_by_the_22_05_daemon():
    assert offered_versions(openapi()) == ["v0.0.36", "v0.0.37", "v0.0.38"]


def test_a_daemon_without_v0_0_38_is_refused_naming_both_sides():
    doc = openapi()
    doc["paths"] = {p: v for p, v in doc["paths"].items() if "v0.0.38" not in p}
    from slurmkit.backends.rest import unsupported

    err = unsupported(offered_versions(doc), "unix:/x.sock")
    assert isinstance(err, BackendUnavailable)
    assert "v0.0.36, v0.0.37" in err.message and "supports v0.0.38" in err.message


@pytest.mark.parametrize("name,extra", [("submit-ok", {}), ("submit-array", {"array": "0-2%1"}),
                                        ("submit-held", {"hold": None})])
def test_job_properties_are_exactly_what_the_real_daemon_accepted(name, extra):
    recorded = rec(name)["request"]
    req = recorded_request(name, **extra)
    assert job_properties(req, recorded["job"]["environment"]) == recorded["job"]


def test_the_tag_is_the_job_comment_and_workdir_defaults_to_the_request():
    req = SubmitRequest(name="t", script="#!/bin/bash\n", options={"job-name": "t"}, tag="abc", workdir="/w")
    job = job_properties(req, {"PATH": "/bin"})
    assert job["comment"] == "sk:abc" and job["current_working_directory"] == "/w"
    req.options["chdir"] = "/elsewhere"
    assert job_properties(req, {})["current_working_directory"] == "/elsewhere"


def test_units_become_the_integers_v0_0_38_declares():
    req = SubmitRequest(name="t", script="#!/bin/bash\n", tag="x", workdir="/w",
                        options={"time": "1-02:00:00", "mem-per-gpu": "8G", "mem": "1T", "exclusive": None})
    job = job_properties(req, {})
    assert job["time_limit"] == 26 * 60 and job["memory_per_gpu"] == 8192 and job["memory_per_node"] == 1024 ** 2
    assert job["exclusive"] == "exclusive"  # "true" is rejected by 22.05 (see the data README)


def test_batch_signal_is_refused_before_slurmrestd_rejects_it():
    assert rec("submit-signal-batch")["status"] == 400  # what the real daemon does with B:
    req = recorded_request("submit-ok", signal="B:USR1@60")
    with pytest.raises(InputError) as exc:
        job_properties(req, {})
    assert exc.value.problems[0].key == "preempt" and "--backend cli" in (exc.value.problems[0].hint or "")
    assert job_properties(recorded_request("submit-ok", signal="USR1@60"), {})["signal"] == "USR1@60"


def test_an_option_without_a_v0_0_38_property_is_a_located_error():
    with pytest.raises(InputError) as exc:
        job_properties(recorded_request("submit-ok", switches="1", nodelist="gpu01"), {})
    assert [p.key for p in exc.value.problems] == ["sbatch_extra.switches", "sbatch_extra.nodelist"]


def test_submit_answers():
    ok, held = rec("submit-ok"), rec("submit-held")
    assert submitted_job_id(ok["status"], ok["response"]) == ok["response"]["job_id"]
    # Held: an `errors` entry, yet the job exists. Treating it as a failure would resubmit a duplicate.
    assert held["response"]["errors"] and submitted_job_id(held["status"], held["response"]) == 862


def test_invalid_account_is_a_usage_error_with_slurms_message():
    bad = rec("submit-invalid-account")
    with pytest.raises(InputError) as exc:
        submitted_job_id(bad["status"], bad["response"])
    problem = exc.value.problems[0]
    assert "Invalid account or account/partition combination specified" in problem.message
    assert problem.key == "account" and "sacctmgr" in (problem.hint or "")


def test_controller_unreachable_behind_slurmrestd_is_retryable():
    down = rec("submit-controller-unreachable")
    with pytest.raises(BackendUnavailable) as exc:  # what submission.py retries after a find_by_tag
        submitted_job_id(down["status"], down["response"])
    assert "Unable to contact slurm controller" in exc.value.message and "duplicate" in (exc.value.hint or "")


def test_unparsable_option_is_a_usage_error():
    bad = rec("submit-signal-batch")
    with pytest.raises(InputError, match="Invalid SIGNAL specification"):
        submitted_job_id(bad["status"], bad["response"])


def test_cancel_of_an_unknown_job():
    unknown = rec("cancel-unknown")
    assert isinstance(error_from(unknown["status"], unknown["response"], "999999"), JobNotFound)


def test_job_records_as_jobinfo():
    running = job_info(rec("job-running")["response"]["jobs"][0], now=1796248681 + 0)
    assert (running.job_id, running.name, running.user, running.state, running.nodes) == \
        ("859", "be-rec-ok", "alice", "RUNNING", "gpu01")
    # %x-%j.out expanded in the job's working directory, as slurmd opens it (the file existed: be-rec-ok-859.out).
    assert running.stdout == running.stderr == "/tmp/be/be-rec-ok-859.out"
    assert running.comment == rec("submit-ok")["request"]["job"]["comment"]
    cancelled = job_info(rec("job-cancelled")["response"]["jobs"][0])
    assert cancelled.state == "CANCELLED" and cancelled.exit_code == "0:15"  # raw wait status 15 = SIGTERM


def test_array_records_use_scontrols_ids():
    jobs = [job_info(j) for j in rec("job-array")["response"]["jobs"]]
    assert [j.job_id for j in jobs] == ["860_[1-2%1]", "860_0"]
    assert jobs[1].stdout == "/tmp/be/be-rec-array-861.out" and jobs[0].reason == "JobArrayTaskLimit"


def test_find_by_tag_in_the_job_list():
    jobs = rec("jobs")["response"]["jobs"]
    tag = rec("submit-ok")["request"]["job"]["comment"].removeprefix("sk:")
    assert tagged_job(jobs, tag) == rec("submit-ok")["response"]["job_id"]
    assert tagged_job(jobs, "no-such-tag") is None
    array = rec("job-array")["response"]["jobs"]
    assert tagged_job(array[1:], array[1]["comment"].removeprefix("sk:")) == 860  # a task -> its array


def test_submit_environment_keeps_the_shell_but_not_slurms_client_variables():
    req = SubmitRequest(name="t", script="", options={}, tag="x", workdir="/", environment={"EXTRA": "1"})
    env = submit_environment(req, {"PATH": "/bin", "SLURM_JWT": "secret", "SLURM_CONF": "/x", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h", "EXTRA": "1"}


def test_test_only_is_refused_with_the_alternative():
    with pytest.raises(InputError, match="test-only"):
        RestBackend("unix:/nonexistent").submit(recorded_request("submit-ok"), test_only=True)


def test_unreachable_socket_is_backend_unavailable():
    with pytest.raises(BackendUnavailable, match="not listening"):
        RestBackend("unix:/nonexistent/rest.sock").find_by_tag("x")


def test_site_rest_url_and_env_override():
    class Site:
        backend = "rest"
        rest_url = "unix:/run/site.sock"

    assert RestBackend.from_site(Site(), environ={}).url == "unix:/run/site.sock"
    be = RestBackend.from_site(Site(), environ={"SK_REST_URL": "https://h:6820", "SLURM_JWT": "tok"})
    assert (be.url, be.token) == ("https://h:6820", "tok")
    assert get_backend(None, Site()).name == "rest"


class _Replay(BaseHTTPRequestHandler):
    """Stand-in for a JWT-authenticated slurmrestd (none can exist here): replays recorded answers."""

    seen: ClassVar[list[tuple[str, str, dict, object]]] = []
    known_version = "v0.0.38"

    def _answer(self, status: int, body) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        self.seen.append((method, self.path, dict(self.headers), body))
        if self.path == "/openapi/v3":
            doc = openapi()  # the recorded document, less the versions this stand-in does not serve
            doc["paths"] = {p: v for p, v in doc["paths"].items() if "v0.0.38" not in p or self.known_version in p}
            self._answer(200, doc)
        elif f"/slurm/{self.known_version}/" not in self.path:
            miss = rec("unsupported-version-ping")
            self._answer(miss["status"], miss["response"])
        elif self.path.endswith("/job/submit"):
            self._answer(200, rec("submit-ok")["response"])
        else:
            self._answer(200, rec("jobs")["response"])

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def log_message(self, *args):
        pass


@pytest.fixture
def replay():
    _Replay.seen = []
    server = HTTPServer(("127.0.0.1", 0), _Replay)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_http_sends_the_jwt_headers_and_the_mapped_job(replay):
    req = recorded_request("submit-ok")
    result = RestBackend(replay, token="tok123", user="alice").submit(req)
    assert result.job_id == rec("submit-ok")["response"]["job_id"] and result.backend == "rest"
    method, path, headers, body = _Replay.seen[-1]
    assert (method, path) == ("POST", "/slurm/v0.0.38/job/submit")
    assert headers["X-SLURM-USER-TOKEN"] == "tok123" and headers["X-SLURM-USER-NAME"] == "alice"
    assert body["script"] == req.script and body["job"]["comment"] == f"sk:{req.tag}"


def test_http_without_a_token_says_how_to_get_one(replay):
    with pytest.raises(BackendUnavailable) as exc:
        RestBackend(replay).find_by_tag("x")
    assert "SLURM_JWT" in exc.value.message and "scontrol token" in (exc.value.hint or "")
    assert _Replay.seen == []  # nothing was sent without credentials


def test_a_daemon_lacking_our_version_fails_with_the_versions_it_offers(replay, monkeypatch):
    monkeypatch.setattr(_Replay, "known_version", "v0.0.37")  # 404 (recorded text) for every v0.0.38 path
    with pytest.raises(BackendUnavailable) as exc:
        RestBackend(replay, token="t").submit(recorded_request("submit-ok"))
    assert "offers API v0.0.36, v0.0.37;" in exc.value.message and "supports v0.0.38" in exc.value.message
    assert [p for _, p, _, _ in _Replay.seen] == ["/slurm/v0.0.38/job/submit", "/openapi/v3"]
