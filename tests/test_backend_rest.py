"""The rest backend on recorded real slurmrestd exchanges: 22.05's v0.0.38 (tests/data/slurmrest/) and 25.11's
v0.0.44 (tests/data/slurmrest/v0.0.44/); see the README there. Regression data only: the backend against the real
daemons (unix socket and JWT) is tests/integration/test_rest_on_devcluster.py.

Version negotiation is exercised against a small local HTTP server that serves a recorded OpenAPI document cut
down to chosen versions (a daemon offering exactly those cannot be started here) and replays recorded answers.
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
    newest_common,
    offered_versions,
    remembered_version,
    submit_environment,
    submitted_job_id,
    tagged_job,
)
from slurmkit.backends.restjson import dialect
from slurmkit.errors import BackendError, BackendUnavailable, InputError, JobNotFound
from slurmkit.request import SubmitRequest
from slurmkit.slurm.errors import classify

DATA = Path(__file__).parent / "data" / "slurmrest"
V44 = "v0.0.44"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """The negotiated-version memory goes to a fresh cache directory, not the tester's ~/.cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def rec(name: str, version: str = "v0.0.38") -> dict:
    base = DATA if version == "v0.0.38" else DATA / version
    return json.loads((base / f"{name}.json").read_text())


def openapi(version: str = "v0.0.38") -> dict:
    base = DATA if version == "v0.0.38" else DATA / version
    return json.loads(gzip.decompress((base / "openapi-v3.json.gz").read_bytes()))


def recorded_request(name: str, version: str = "v0.0.38", **extra) -> SubmitRequest:
    """The SubmitRequest record.py built for a recording (same options), with the recorded tag."""
    job = rec(name, version)["request"]["job"]
    options = {"job-name": job["name"], "partition": "gpu", "nodes": "1", "ntasks": "1", "gpus-per-node": "a100:1",
               "cpus-per-task": "1", "mem-per-gpu": "100M", "time": "00:02:00", "output": "%x-%j.out", **extra}
    return SubmitRequest(name=job["name"], script=rec(name, version)["request"]["script"], options=options,
                         tag=job["comment"].removeprefix("sk:"), workdir=job["current_working_directory"])


def test_versions_offered_by_the_22_05_daemon():
    assert offered_versions(openapi()) == ["v0.0.36", "v0.0.37", "v0.0.38"]


def test_versions_offered_by_the_25_11_daemon_and_the_pick():
    assert offered_versions(openapi(V44)) == ["v0.0.41", "v0.0.42", "v0.0.43", V44]
    assert newest_common(offered_versions(openapi(V44))) == V44
    assert newest_common(offered_versions(openapi())) == "v0.0.38"
    assert newest_common(["v0.0.41", "v0.0.42", "v0.0.43"]) == "v0.0.43"  # 24.11/25.05's newest
    assert newest_common(["v0.0.40", "v0.0.41", "v0.0.42"]) is None  # 24.05: nothing slurmkit speaks


def test_a_daemon_without_a_shared_version_is_refused_naming_both_sides():
    doc = openapi()
    doc["paths"] = {p: v for p, v in doc["paths"].items() if "v0.0.38" not in p}
    from slurmkit.backends.rest import unsupported

    err = unsupported(offered_versions(doc), "unix:/x.sock")
    assert isinstance(err, BackendError) and not isinstance(err, BackendUnavailable)  # not retried
    assert "v0.0.36, v0.0.37" in err.message and "supports v0.0.38, v0.0.43, v0.0.44" in err.message


@pytest.mark.parametrize("version", ["v0.0.38", V44])
@pytest.mark.parametrize("name,extra", [("submit-ok", {}), ("submit-array", {"array": "0-2%1"}),
                                        ("submit-held", {"hold": None})])
def test_job_properties_are_exactly_what_the_real_daemon_accepted(name, extra, version):
    recorded = rec(name, version)["request"]
    req = recorded_request(name, version, **extra)
    env = recorded["job"]["environment"]
    env = dict(e.split("=", 1) for e in env) if isinstance(env, list) else env
    assert job_properties(req, env, version) == recorded["job"]


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


PLANNED = {"job-name": "be-x", "partition": "gpu", "nodes": "2", "ntasks-per-node": "8", "gpus-per-node": "a100:8",
           "cpus-per-task": "4", "mem-per-gpu": "8G", "time": "04:00:00", "exclusive": None, "chdir": "/w",
           "output": "%x-%A_%a.out", "error": "%x-%A_%a.err", "array": "0-11%4", "dependency": "afterok:12:13",
           "signal": "B:USR1@120", "requeue": None, "open-mode": "append", "mail-user": "a@b", "mail-type": "END,FAIL",
           "constraint": "ib&a100", "cpus-per-gpu": "4", "gpus": "a100:16"}


def test_every_planned_option_as_the_v0_0_44_fields_sbatch_itself_sets():
    req = SubmitRequest(name="be-x", script="#!/bin/bash\n", options=PLANNED, tag="t", workdir="/w")
    job = job_properties(req, {"PATH": "/bin", "A": "x=y"}, V44)
    assert job == {
        "name": "be-x", "partition": "gpu", "nodes": "2", "tasks_per_node": 8, "tres_per_node": "gres/gpu:a100:8",
        "cpus_per_task": 4, "tres_per_task": "cpu=4", "memory_per_tres": "gres/gpu:8192",
        "time_limit": {"set": True, "infinite": False, "number": 240}, "shared": ["none"],
        "current_working_directory": "/w", "standard_output": "%x-%A_%a.out", "standard_error": "%x-%A_%a.err",
        "array": "0-11%4", "dependency": "afterok:12:13", "kill_warning_signal": "USR1",
        "kill_warning_delay": {"set": True, "infinite": False, "number": 120}, "kill_warning_flags": ["BATCH_JOB"],
        "requeue": True, "open_mode": ["APPEND"], "mail_user": "a@b", "mail_type": ["END", "FAIL"],
        "constraints": "ib&a100", "cpus_per_tres": "gres/gpu:4", "tres_per_job": "gres/gpu:a100:16",
        "comment": "sk:t", "environment": ["PATH=/bin", "A=x=y"], "oom_kill_step": 0xFFFE}


@pytest.mark.parametrize("given,fields", [
    ("USR1", {"kill_warning_signal": "USR1", "kill_warning_delay": 60}),  # sbatch's default delay
    ("SIGTERM@30", {"kill_warning_signal": "TERM", "kill_warning_delay": 30}),
    ("R:10@5", {"kill_warning_signal": "10", "kill_warning_delay": 5, "kill_warning_flags": ["RESERVATION_JOB"]}),
    ("BR:USR2@9", {"kill_warning_signal": "USR2", "kill_warning_delay": 9,
                   "kill_warning_flags": ["BATCH_JOB", "RESERVATION_JOB"]}),
])
def test_signal_forms_read_as_get_signal_opts_reads_them(given, fields):
    req = SubmitRequest(name="t", script="", options={"signal": given}, tag="t", workdir="/")
    job = job_properties(req, {}, V44)
    got = {k: (v["number"] if isinstance(v, dict) else v) for k, v in job.items() if k.startswith("kill_warning")}
    assert got == fields


@pytest.mark.parametrize("bad", ["B:NOPE@60", "B:USR1@soon", "B:USR1@70000"])
def test_a_signal_slurmrestd_would_drop_is_a_located_error_before_sending(bad):
    # The real daemon creates the job without the signal and only notes it (recorded: submit-signal-unknown).
    assert rec("submit-signal-unknown", V44)["response"]["job_id"]
    req = SubmitRequest(name="t", script="", options={"signal": bad}, tag="t", workdir="/")
    with pytest.raises(InputError) as exc:
        job_properties(req, {}, V44)
    assert exc.value.problems[0].key == "signal"


def test_a_recorded_dropped_field_is_recognised_and_other_notices_are_not():
    dropped = dialect(V44).submit_notice_is_failure(rec("submit-signal-unknown", V44)["response"])
    assert dropped == "Unknown signal (null) (at #/job/kill_warning_signal/)"
    assert dialect(V44).submit_notice_is_failure(rec("submit-held", V44)["response"]) is None


def test_v0_0_44_option_without_a_field_is_a_located_error():
    req = SubmitRequest(name="t", script="", options={"hint": "nomultithread", "get-user-env": None}, tag="t",
                        workdir="/")
    with pytest.raises(InputError) as exc:
        job_properties(req, {}, V44)
    assert [p.key for p in exc.value.problems] == ["sbatch_extra.hint", "sbatch_extra.get-user-env"]
    assert "v0.0.44" in exc.value.problems[0].message


def test_v0_0_44_submit_answers():
    ok, held, bad = (rec(n, V44) for n in ("submit-ok", "submit-held", "submit-invalid-account"))
    assert submitted_job_id(ok["status"], ok["response"]) == ok["response"]["job_id"]
    assert held["response"]["warnings"] and submitted_job_id(held["status"], held["response"]) > 0
    with pytest.raises(InputError) as exc:
        submitted_job_id(bad["status"], bad["response"])
    assert "Invalid account or account/partition combination specified" in exc.value.problems[0].message
    assert exc.value.problems[0].key == "account"


def test_v0_0_44_records_as_jobinfo():
    running = job_info(rec("job-running", V44)["response"]["jobs"][0], version=V44)
    job_id = str(rec("submit-ok", V44)["response"]["job_id"])
    assert (running.job_id, running.name, running.user, running.state, running.nodes) == \
        (job_id, "be-rec-ok", "alice", "RUNNING", "gpu01")
    assert running.stdout == running.stderr == f"/tmp/be/be-rec-ok-{job_id}.out"  # slurmctld's stdout_expanded
    assert running.comment == rec("submit-ok", V44)["request"]["job"]["comment"]
    cancelled = job_info(rec("job-cancelled", V44)["response"]["jobs"][0], version=V44)
    assert cancelled.state == "CANCELLED" and cancelled.exit_code == "0:15"  # status SIGNALED, signal 15


def test_v0_0_44_array_records_use_scontrols_ids():
    jobs = [job_info(j, version=V44) for j in rec("job-array", V44)["response"]["jobs"]]
    array_id = rec("submit-array", V44)["response"]["job_id"]
    assert [j.job_id for j in jobs] == [f"{array_id}_[1-2%1]", f"{array_id}_0"]
    assert jobs[0].reason == "JobArrayTaskLimit" and jobs[0].array_job_id == jobs[1].array_job_id == str(array_id)
    assert jobs[1].stdout == f"/tmp/be/be-rec-array-{array_id + 1}.out"  # %j of a task: its own job id


@pytest.mark.parametrize("states,shown", [(["RUNNING"], "RUNNING"), (["RUNNING", "COMPLETING"], "COMPLETING"),
                                          (["PENDING", "REQUEUED"], "REQUEUED"), (["CANCELLED"], "CANCELLED")])
def test_v0_0_44_state_list_as_scontrol_shows_it(states, shown):
    assert dialect(V44).state({"job_state": states}) == shown


def test_v0_0_44_find_by_tag_and_cancel_answers():
    jobs = rec("jobs", V44)["response"]["jobs"]
    tag = rec("submit-ok", V44)["request"]["job"]["comment"].removeprefix("sk:")
    assert tagged_job(jobs, tag, V44) == rec("submit-ok", V44)["response"]["job_id"]
    assert tagged_job(jobs, "no-such-tag", V44) is None
    task = rec("job-array", V44)["response"]["jobs"][1]
    array_id = rec("submit-array", V44)["response"]["job_id"]
    assert tagged_job([task], task["comment"].removeprefix("sk:"), V44) == array_id  # a task -> its array
    d = dialect(V44)
    assert d.cancel_complaint(200, rec("cancel-ok", V44)["response"]) is None
    ended = d.cancel_complaint(200, rec("cancel-ended", V44)["response"])
    assert ended and classify(ended) == "already-ended"  # HTTP 200 with status[].error: not a success
    unknown = d.cancel_complaint(200, rec("cancel-unknown", V44)["response"])
    assert unknown and classify(unknown) == "not-found"


class _Replay(BaseHTTPRequestHandler):
    """A slurmrestd serving exactly `offers` (a recorded OpenAPI document cut down to them), with recorded answers:
    v0.0.38 ones for v0.0.38, 25.11's v0.0.44 ones for v0.0.43/v0.0.44 (same fields)."""

    seen: ClassVar[list[tuple[str, str, dict, object]]] = []
    offers: ClassVar[tuple[str, ...]] = ("v0.0.36", "v0.0.37", "v0.0.38")

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
        version = next((v for v in self.offers if f"/slurm/{v}/" in self.path), None)
        data = "v0.0.38" if version == "v0.0.38" else V44
        if self.path == "/openapi/v3":
            doc = openapi(V44)
            paths = {**openapi()["paths"], **doc["paths"]}
            for v in ("v0.0.40", "v0.0.39"):  # versions neither recording has, for 24.05-like daemons
                paths[f"/slurm/{v}/job/submit"] = {}
            doc["paths"] = {p: x for p, x in paths.items() if any(f"/{v}/" in p for v in self.offers)}
            self._answer(200, doc)
        elif version is None:
            miss = rec("unsupported-version-ping", V44)
            self._answer(miss["status"], miss["response"])
        elif self.path.endswith("/job/submit"):
            self._answer(200, rec("submit-ok", data)["response"])
        else:
            self._answer(200, rec("jobs", data)["response"])

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


def test_http_sends_the_jwt_headers_and_the_mapped_job(replay, monkeypatch):
    monkeypatch.setattr(_Replay, "offers", ("v0.0.41", "v0.0.42", "v0.0.43", V44))
    req = recorded_request("submit-ok", V44)
    result = RestBackend(replay, token="tok123", user="alice").submit(req)
    assert result.job_id == rec("submit-ok", V44)["response"]["job_id"] and result.backend == "rest"
    assert len(_Replay.seen) == 1  # the newest version first: no negotiation round trip on 25.11
    method, path, headers, body = _Replay.seen[-1]
    assert (method, path) == ("POST", f"/slurm/{V44}/job/submit")
    assert headers["X-SLURM-USER-TOKEN"] == "tok123" and headers["X-SLURM-USER-NAME"] == "alice"
    assert body["script"] == req.script and body["job"]["comment"] == f"sk:{req.tag}"


def test_http_without_a_token_says_how_to_get_one(replay):
    with pytest.raises(BackendUnavailable) as exc:
        RestBackend(replay).find_by_tag("x")
    assert "SLURM_JWT" in exc.value.message and "scontrol token" in (exc.value.hint or "")
    assert _Replay.seen == []  # nothing was sent without credentials


def test_a_22_05_daemon_is_negotiated_down_once_then_remembered(replay):
    req = recorded_request("submit-ok")
    first = RestBackend(replay, token="t").submit(req)
    assert first.job_id == rec("submit-ok")["response"]["job_id"]
    assert [(m, p) for m, p, _, _ in _Replay.seen] == [
        ("POST", f"/slurm/{V44}/job/submit"), ("GET", "/openapi/v3"), ("POST", "/slurm/v0.0.38/job/submit")]
    assert isinstance(_Replay.seen[-1][3]["job"]["environment"], dict)  # the body rebuilt in v0.0.38's form
    assert remembered_version(replay) == "v0.0.38"
    _Replay.seen.clear()
    RestBackend(replay, token="t").submit(req)  # a later process: straight to the remembered version
    assert [p for _, p, _, _ in _Replay.seen] == ["/slurm/v0.0.38/job/submit"]


def test_a_24_11_like_daemon_gets_v0_0_43(replay, monkeypatch):
    monkeypatch.setattr(_Replay, "offers", ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43"))
    be = RestBackend(replay, token="t")
    assert be.find_by_tag("no-such") is None and be.version == "v0.0.43"
    assert [p for _, p, _, _ in _Replay.seen] == [f"/slurm/{V44}/jobs", "/openapi/v3", "/slurm/v0.0.43/jobs"]


def test_a_daemon_sharing_no_version_is_refused_once_with_both_lists(replay, monkeypatch):
    monkeypatch.setattr(_Replay, "offers", ("v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42"))
    from slurmkit import submission

    with pytest.raises(BackendError) as exc:  # not BackendUnavailable: submission.py does not retry it
        submission.submit(RestBackend(replay, token="t"), recorded_request("submit-ok"), wait_s=0)
    assert not isinstance(exc.value, BackendUnavailable)
    assert "offers API v0.0.39, v0.0.40, v0.0.41, v0.0.42;" in exc.value.message
    assert "supports v0.0.38, v0.0.43, v0.0.44" in exc.value.message
    assert [p for _, p, _, _ in _Replay.seen] == [f"/slurm/{V44}/job/submit", "/openapi/v3"]


def test_a_pinned_version_is_never_renegotiated(replay):
    with pytest.raises(BackendError) as exc:
        RestBackend(replay, token="t", version=V44).submit(recorded_request("submit-ok"))
    assert f"does not serve API {V44} and offers API v0.0.36, v0.0.37, v0.0.38;" in exc.value.message
    with pytest.raises(BackendError) as exc:
        RestBackend(replay, token="t", version="v0.0.37").find_by_tag("x")  # offered, but not one slurmkit speaks
    assert "serves API v0.0.37, which slurmkit does not speak" in exc.value.message


def test_the_remembered_versions_keep_the_32_most_recent_urls(tmp_path):
    from slurmkit.backends.rest import remember_version

    for i in range(40):
        remember_version(f"unix:/tmp/s{i}.sock", "v0.0.44" if i % 2 else "v0.0.38")
    remember_version("unix:/tmp/s8.sock", "v0.0.43")  # the oldest kept, used again: now the newest
    remember_version("unix:/tmp/new.sock", "v0.0.44")  # evicts the oldest, which is now s9
    kept = json.loads((tmp_path / "cache" / "slurmkit" / "rest" / "versions.json").read_text())
    assert len(kept) == 32 and list(kept)[-2:] == ["unix:/tmp/s8.sock", "unix:/tmp/new.sock"]
    assert "unix:/tmp/s9.sock" not in kept and kept["unix:/tmp/s8.sock"] == "v0.0.43"
    assert remembered_version("unix:/tmp/s39.sock") == "v0.0.44" and remembered_version("unix:/tmp/s0.sock") is None
