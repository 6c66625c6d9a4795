"""Re-record the slurmrest fixtures from the devcluster (run as alice, see README.md in this directory).

Every exchange goes through slurmkit's own RestBackend (its trace hook), so the recorded requests are exactly what
the backend sends, in the API version it negotiates with the daemon (v0.0.38 on 22.05, v0.0.44 on 25.11). Jobs are
named be-rec-*; each one is cancelled before the script ends.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
import uuid
from pathlib import Path

from slurmkit.backends.rest import Exchange, RestBackend, submission_body, submit_environment
from slurmkit.errors import SlurmkitError
from slurmkit.request import SubmitRequest

HERE = Path(__file__).resolve().parent
URL = sys.argv[1] if len(sys.argv) > 1 else "unix:/run/slurmkit-devcluster/rest-alice.sock"
WORKDIR = sys.argv[2] if len(sys.argv) > 2 else "/tmp"
OUT = Path(sys.argv[3]) if len(sys.argv) > 3 else HERE  # alice cannot write into the repository
last: list[Exchange] = []
be = RestBackend(URL, trace=last.append, remember=False)
V = be.detect_version()
be.version = V


def save(name: str, ex: Exchange, *, request: bool = True) -> None:
    out = {"method": ex.method, "path": ex.path, "status": ex.status, "response": ex.response}
    if request and ex.body is not None:
        out["request"] = ex.body
    (OUT / f"{name}.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")


def request(name: str, options: dict, script: str = "#!/bin/bash\nsleep 60\n") -> SubmitRequest:
    base = {"job-name": name, "partition": "gpu", "nodes": "1", "ntasks": "1", "gpus-per-node": "a100:1",
            "cpus-per-task": "1", "mem-per-gpu": "100M", "time": "00:02:00", "output": "%x-%j.out"}
    return SubmitRequest(name=name, script=script, options={**base, **options}, tag="rec" + uuid.uuid4().hex[:8],
                         workdir=WORKDIR)


# The API versions the daemon offers (its whole generated OpenAPI document, gzipped: 0.5 MB as text).
be.offered_versions()
(OUT / "openapi-v3.json.gz").write_bytes(gzip.compress(json.dumps(last[-1].response, indent=1).encode(), mtime=0))

ok = request("be-rec-ok", {})
job_id = be.submit(ok).job_id
save("submit-ok", last[-1])
time.sleep(2)
be.job(str(job_id))
save("job-running", last[-1])
assert be.find_by_tag(ok.tag) == job_id
save("jobs", last[-1], request=False)
assert [r.outcome for r in be.cancel([str(job_id)])] == ["cancelled"]
save("cancel-ok", last[-1])
time.sleep(1)
be.job(str(job_id))
save("job-cancelled", last[-1])

arr = request("be-rec-array", {"array": "0-2%1"})
array_id = be.submit(arr).job_id
save("submit-array", last[-1])
time.sleep(2)
be.job(str(array_id))
save("job-array", last[-1])
be.cancel([array_id])

held = request("be-rec-held", {"hold": None})
held_id = be.submit(held).job_id
save("submit-held", last[-1])
be.cancel([held_id])

try:
    be.submit(request("be-rec-acct", {"account": "nosuch"}))
except SlurmkitError:
    save("submit-invalid-account", last[-1])

sig = request("be-rec-signal", {"signal": "USR1@60"})
body = submission_body(sig, submit_environment(sig), V)
if V == "v0.0.38":
    # The B: signal prefix (slurmkit's preemption trap) as the backend would send it without its guard.
    body["job"]["signal"] = "B:USR1@60"
    be.request("POST", f"/slurm/{V}/job/submit", body)
    save("submit-signal-batch", last[-1])
else:
    # A signal name slurmrestd cannot read, sent raw: the job is created anyway, with an `errors` entry.
    body["job"]["kill_warning_signal"] = "NOPE"
    be.request("POST", f"/slurm/{V}/job/submit", body)
    save("submit-signal-unknown", last[-1])
    be.request("DELETE", f"/slurm/{V}/job/{last[-1].response['job_id']}")
    # DELETE of a job that has already ended (cancel() asks first, so sent raw): 200 with status[].error.
    be.request("DELETE", f"/slurm/{V}/job/{job_id}")
    save("cancel-ended", last[-1])

# cancel() asks first and never sends a DELETE for a job Slurm does not know: send it raw.
be.request("DELETE", f"/slurm/{V}/job/999999")
save("cancel-unknown", last[-1])

be.request("GET", "/slurm/v0.0.39/ping")  # served by neither 22.05 nor 25.11
save("unsupported-version-ping", last[-1])
print("recorded into", OUT)
