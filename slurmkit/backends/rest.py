"""The slurmrestd backend: submit, look up, cancel over Slurm's REST API (unix socket or HTTP(S) with a JWT).

Why it exists: it needs no Slurm client binaries or munge key on the submitting machine (a web portal, a CI
runner), only a route to slurmrestd.

Transport. `rest_url` (site config, or $SK_REST_URL) is `unix:/path/to.sock` or `http(s)://host:port`.
- unix socket: `rest_auth/local` authenticates the connecting uid; slurmrestd accepts only its own uid (or root),
  so each user needs their own daemon (contrib/devcluster runs one per user).
- HTTP(S): `rest_auth/jwt`; the token comes from $SLURM_JWT (what `scontrol token` prints) and is sent as
  X-SLURM-USER-TOKEN with X-SLURM-USER-NAME. Only over HTTP(S): a token never travels to a local socket.
  (Debian's 22.05 is built without libjwt; the 25.11 devcluster runs a rest_auth/jwt daemon on 127.0.0.1:16820.)
Stdlib http.client only (a unix-socket HTTPConnection subclass): no new dependency on the submit path.

API version. slurmrestd serves one path prefix per API version it loaded (`/slurm/v0.0.44/...`); the list is in
its generated OpenAPI document (GET /openapi/v3). slurmkit speaks v0.0.38 (Slurm 22.05), v0.0.43 and v0.0.44
(Slurm 25.11 serves v0.0.41-v0.0.44); the JSON of each is in restjson.py. Negotiation costs nothing when it
succeeds: a request goes to the version this user last negotiated with this URL (remembered in
~/.cache/slurmkit/rest/), else to the newest slurmkit speaks. Only when the daemon answers "Unable (to) find
requested URL" (the path is not routed, so nothing was done) is its OpenAPI document read; the newest version
both sides know is picked, remembered, and the request sent again. When there is none, the refusal names the
versions the daemon offers and the ones slurmkit speaks. A version given explicitly (`version=`) is never
renegotiated.

What each version does with slurmkit's options is in restjson.py; answers common to all:
- A held or otherwise noteworthy submission answers 200 with a job_id AND an `errors`/`warnings` entry (e.g.
  "Job is in held state"); the job exists, so the job_id decides success.
- A refused job answers HTTP 500 with errors[].error = Slurm's message ("Invalid account ..."): classified by
  slurmkit/slurm/errors.py like the CLI's words (a user mistake is exit 2).
"""

from __future__ import annotations

import contextlib
import getpass
import http.client
import json
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from slurmkit.backends.base import Backend, CancelResult, JobQuery, cancel_each
from slurmkit.backends.restjson import SUPPORTED, Dialect, dialect, messages
from slurmkit.errors import BackendError, BackendUnavailable, InputError, Problem
from slurmkit.job import JobInfo
from slurmkit.request import SubmitRequest, SubmitResult
from slurmkit.slurm import errors as slurm_errors
from slurmkit.slurm.jobs import me as slurm_me

# slurmrestd's plain-text 404 for a path it does not route: 22.05 "Unable find requested URL", 25.11 "Unable to
# find requested URL endpoint" (both observed).
_NOT_ROUTED = re.compile(r"Unable (?:to )?find requested URL")
_VERSION_PATH = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/job/submit$")


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version[1:].split("."))


def submission_body(request: SubmitRequest, environment: dict[str, str], version: str = SUPPORTED[-1]
                    ) -> dict[str, Any]:
    return {"script": request.script, "job": dialect(version).job_properties(request, environment)}


def submit_environment(request: SubmitRequest, base: dict[str, str] | None = None) -> dict[str, str]:
    """What sbatch's default --export=ALL would give the job: the submitting environment, plus the request's.

    slurmrestd requires an explicit environment. SLURM_* variables are left out: they describe the client
    (SLURM_CONF, an enclosing job's SLURM_JOB_ID) or are secrets (SLURM_JWT), and slurmd sets the job's own.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("SLURM_")}
    env.update(request.environment)
    return env


def offered_versions(spec: dict[str, Any]) -> list[str]:
    """The slurmctld API versions a daemon's OpenAPI document offers (those with a job/submit path), oldest first."""
    found = {m.group(1) for p in spec.get("paths", {}) if (m := _VERSION_PATH.match(p))}
    return sorted(found, key=_key)


def newest_common(offered: list[str]) -> str | None:
    usable = [v for v in SUPPORTED if v in offered]
    return max(usable, key=_key) if usable else None


def unsupported(offered: list[str], url: str, wanted: str | None = None) -> BackendError:
    """No version both sides speak: not transient, so a BackendError (no retry), naming both sides' versions."""
    if wanted and wanted in offered:
        missing = f"serves API {wanted}, which slurmkit does not speak; it "
    else:
        missing = f"does not serve API {wanted} and " if wanted else ""
    return BackendError(
        f"slurmrestd at {url} {missing}offers API {', '.join(offered) or 'no slurm/ job API'}; slurmkit's rest "
        f"backend supports {', '.join(SUPPORTED)}",
        hint="use --backend cli, or load one of those API versions in slurmrestd (slurmrestd -d list)")


def error_from(status: int, doc: dict[str, Any], what: str) -> Exception:
    """A slurmrestd error answer as slurmkit's errors (Slurm's words classified by slurmkit/slurm/errors.py)."""
    text = "; ".join(messages(doc)) or f"HTTP {status}"
    if (status in (400, 422) and slurm_errors.classify(text) == "other") or "Unable to convert" in text:
        return InputError(Problem(f"slurmrestd could not parse the {what}: {text}",
                                  hint="an option value is not accepted by this slurmrestd; try --backend cli"))
    if "Protocol authentication error" in text:  # slurmctld refused the JWT slurmrestd passed on
        return BackendError(f"slurmrestd refused the {what}: {text} (the token was not accepted)",
                            hint="renew the token: export $(scontrol token lifespan=3600)")
    exc = slurm_errors.error(text, what)
    if isinstance(exc, BackendUnavailable):
        exc.message = exc.message.replace("unreachable:", "unreachable (via slurmrestd):")
    elif type(exc) is BackendError:
        return BackendError(f"slurmrestd refused the {what}: {text}")
    return exc


def submitted_job_id(status: int, doc: dict[str, Any]) -> int:
    """The new job's id; a job_id means the job exists even when `errors` carries a notice (e.g. held)."""
    if status == 200 and doc.get("job_id") is not None:
        return int(doc["job_id"])
    raise error_from(status, doc, "job submission")


def job_info(job: dict[str, Any], now: float | None = None, version: str = "v0.0.38") -> JobInfo:
    """One job record of that API version as slurmkit's JobInfo."""
    return dialect(version).job_info(job, now)


def job_properties(request: SubmitRequest, environment: dict[str, str], version: str = "v0.0.38"
                   ) -> dict[str, Any]:
    return dialect(version).job_properties(request, environment)


def tagged_job(jobs: list[dict[str, Any]], tag: str, version: str = "v0.0.38") -> int | None:
    """The job (array: its parent id) whose comment carries this submission tag."""
    d = dialect(version)
    return next((d.unit_id(j) for j in jobs if j.get("comment") == f"sk:{tag}"), None)


_REMEMBERED = 32


def _remembered_path():
    from slurmkit.config.userdirs import cache_dir

    d = cache_dir("rest")
    return d / "versions.json" if d else None


def remembered_version(url: str) -> str | None:
    """The version this user last negotiated with this URL (a cache: a wrong entry costs one renegotiation)."""
    path = _remembered_path()
    try:
        v = json.loads(path.read_text()).get(url) if path else None
    except (OSError, ValueError, AttributeError):
        return None
    return v if v in SUPPORTED else None


def remember_version(url: str, version: str) -> None:
    path = _remembered_path()
    if not path:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        known = json.loads(path.read_text()) if path.exists() else {}
        known = known if isinstance(known, dict) else {}
        known.pop(url, None)
        known[url] = version  # newest last; the oldest go first beyond _REMEMBERED (a test's private sockets)
        known = dict(list(known.items())[-_REMEMBERED:])
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, path)


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


@dataclass
class Exchange:
    """One request and its answer (what the recorder writes to tests/data/slurmrest/)."""

    method: str
    path: str
    body: Any
    status: int
    response: Any


class RestBackend(Backend):
    name = "rest"

    def __init__(self, url: str | None, *, token: str | None = None, user: str | None = None,
                 timeout_s: float = 60.0, version: str | None = None, remember: bool = True,
                 trace: Callable[[Exchange], None] | None = None):
        self.url = url
        self.token = token
        self.user = user
        self.timeout_s = timeout_s
        # The API version: given (never renegotiated), or None until the first answer settles it (module docstring).
        self.version = version
        self.pinned = version is not None
        self.remember = remember  # keep the negotiated version in ~/.cache/slurmkit/rest/ (off in tests)
        self.trace = trace

    @classmethod
    def from_site(cls, site=None, environ: dict[str, str] | None = None) -> RestBackend:
        """URL from $SK_REST_URL or the site's rest_url; JWT from $SLURM_JWT (never from a config file)."""
        env = os.environ if environ is None else environ
        url = env.get("SK_REST_URL") or (site.rest_url if site is not None else None)
        return cls(url, token=env.get("SLURM_JWT"), user=env.get("SLURM_JWT_USER"))

    # -- transport ---------------------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        if not self.url:
            raise BackendUnavailable("no slurmrestd URL configured",
                                     hint="set rest_url in the site config (unix:/path.sock or https://host:port) "
                                     "or export SK_REST_URL")
        if self.url.startswith("unix:"):
            return _UnixHTTPConnection(self.url.removeprefix("unix:").removeprefix("//"), self.timeout_s)
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BackendUnavailable(f"rest_url {self.url!r} is neither unix:/path nor http(s)://host:port")
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        return conn_cls(parts.hostname, parts.port, timeout=self.timeout_s)

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        if self.url and not self.url.startswith("unix:"):
            if not self.token:
                raise BackendUnavailable(f"slurmrestd at {self.url} needs a JWT and $SLURM_JWT is not set",
                                         hint="export $(scontrol token lifespan=3600)  # prints SLURM_JWT=...")
            headers["X-SLURM-USER-TOKEN"] = self.token
            headers["X-SLURM-USER-NAME"] = self.user or getpass.getuser()
        return headers

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One HTTP exchange; the answer as JSON when it is JSON, else its text."""
        data = None if body is None else json.dumps(body).encode()
        conn = self._connection()
        try:
            conn.request(method, path, body=data, headers=self._headers())
            resp = conn.getresponse()
            raw = resp.read().decode(errors="replace")
            status = resp.status
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise BackendUnavailable(f"slurmrestd is not listening at {self.url}: {exc.strerror or exc}",
                                     hint="start slurmrestd, or check rest_url / SK_REST_URL") from exc
        except PermissionError as exc:
            raise BackendUnavailable(f"no permission to connect to {self.url}",
                                     hint="rest_auth/local serves only the uid slurmrestd runs as; use your own "
                                     "socket or HTTP with a JWT") from exc
        except TimeoutError as exc:
            raise BackendUnavailable(f"slurmrestd at {self.url} did not answer within {self.timeout_s:.0f}s") from exc
        except (OSError, http.client.HTTPException) as exc:
            raise BackendUnavailable(f"talking to slurmrestd at {self.url} failed: {exc}") from exc
        finally:
            conn.close()
        try:
            doc: Any = json.loads(raw)
        except ValueError:
            doc = raw
        if self.trace:
            self.trace(Exchange(method, path, body, status, doc))
        if status in (401, 403) and str(self.url).startswith("unix:"):
            raise BackendUnavailable(f"slurmrestd at {self.url} refused this user (HTTP {status}): rest_auth/local "
                                     "accepts only the uid the daemon runs as",
                                     hint="use the socket of a slurmrestd running as you, or HTTP with a JWT")
        if status in (401, 403):
            raise BackendUnavailable(f"slurmrestd at {self.url} refused the credentials (HTTP {status})",
                                     hint="renew the token: export $(scontrol token)")
        return status, doc

    def _guess(self) -> str:
        if self.version:
            return self.version
        return (remembered_version(str(self.url)) if self.remember and self.url else None) or SUPPORTED[-1]

    @property
    def dialect(self) -> Dialect:
        return dialect(self._guess())

    def api(self, method: str, tail: str, body: Any = None,
            make_body: Callable[[str], Any] | None = None) -> tuple[int, dict[str, Any]]:
        """A request to the negotiated API version (`make_body(version)` builds a body that depends on it).

        An unrouted path (plain-text 404: nothing was done, so sending again is safe) means the daemon lacks that
        version: read what it offers, switch to the newest both sides know, send again; none: BackendError."""
        version = self._guess()
        if self.pinned and version not in SUPPORTED:
            raise unsupported(self.offered_versions(), str(self.url), version)
        for _ in range(2):
            status, doc = self.request(method, f"/slurm/{version}/{tail}",
                                       make_body(version) if make_body else body)
            if not (status == 404 and isinstance(doc, str) and _NOT_ROUTED.search(doc)):
                break
            offered = self.offered_versions()
            best = None if self.pinned else newest_common(offered)
            if best is None or best == version:
                raise unsupported(offered, str(self.url), version if self.pinned else None)
            version = best
        self.version = version
        if self.remember and self.url and not self.pinned and remembered_version(str(self.url)) != version:
            remember_version(str(self.url), version)
        if not isinstance(doc, dict):
            raise BackendError(f"slurmrestd answered HTTP {status} with non-JSON: {str(doc)[:200]}")
        return status, doc

    def offered_versions(self) -> list[str]:
        """Read the daemon's OpenAPI document (/openapi/v3; Slurm 22.05 also serves /openapi)."""
        for path in ("/openapi/v3", "/openapi"):
            status, doc = self.request("GET", path)
            if status == 200 and isinstance(doc, dict):
                return offered_versions(doc)
        return []

    def detect_version(self) -> str:
        """The newest API version both this daemon and slurmkit speak, or BackendError listing what it offers."""
        offered = self.offered_versions()
        best = newest_common(offered)
        if best is None:
            raise unsupported(offered, str(self.url))
        return best

    def acting_user(self) -> str:
        """Whose jobs "my jobs" are: the user slurmrestd acts as, which need not be the caller's uid.

        JWT: the user the token is sent for. rest_auth/local: the uid slurmrestd runs as, which is the owner of
        the socket it created (root may connect to any user's socket and submits as that user: observed on 25.11;
        a root-owned socket says nothing, so the caller's own name is used then)."""
        if self.user:
            return self.user
        if self.url and self.url.startswith("unix:"):
            import pwd

            try:
                uid = os.stat(self.url.removeprefix("unix:").removeprefix("//")).st_uid
                if uid != 0:
                    return pwd.getpwuid(uid).pw_name
            except (OSError, KeyError):
                pass
        elif self.url:
            return getpass.getuser()
        return slurm_me()

    # -- Backend -----------------------------------------------------------------------------------------------
    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        version = self._guess()
        job = dialect(version).job_properties(request, {})
        job["environment"] = "<the submitting environment, SLURM_* removed>"
        where = self.url or "<rest_url>"
        guessed = "" if self.version else " (or the newest version the daemon and slurmkit share)"
        return (f"POST {where} /slurm/{version}/job/submit{guessed} with job properties "
                f"{json.dumps(job, sort_keys=True)} and the script below")

    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        if test_only:
            raise InputError(Problem("the rest backend has no --test-only (slurmrestd's job/submit cannot ask "
                                     "when a job would start)", key="--test-only",
                                     hint="use --backend cli --test-only"))
        env = submit_environment(request)
        dialect(self._guess()).job_properties(request, env)  # a mistake is refused before anything is sent
        status, doc = self.api("POST", "job/submit", make_body=lambda v: submission_body(request, env, v))
        job_id = submitted_job_id(status, doc)
        dropped = self.dialect.submit_notice_is_failure(doc)
        if dropped:
            # slurmrestd created the job without a field it could not read: not what was asked for, so undo it.
            self._delete(str(job_id))
            raise InputError(Problem(f"slurmrestd accepted job {job_id} but dropped part of it ({dropped}); the "
                                     "job was cancelled", hint="try --backend cli"))
        return SubmitResult(job_id=job_id, backend=self.name)

    def _records(self) -> list[dict[str, Any]]:
        status, doc = self.api("GET", "jobs")
        if status != 200:
            raise error_from(status, doc, "job list")
        return list(doc.get("jobs") or [])

    def find_by_tag(self, tag: str) -> int | None:
        records = self._records()
        return tagged_job(records, tag, self._guess())

    def _job(self, job_id: str) -> list[JobInfo]:
        """The job (every task of an array) as slurmctld knows it; [] once it has left the controller."""
        status, doc = self.api("GET", f"job/{quote(job_id.split('_[')[0])}")
        if status != 200 or not doc.get("jobs"):
            if status == 200 or slurm_errors.classify("; ".join(messages(doc))) == "not-found":
                return []
            raise error_from(status, doc, job_id)
        return [self.dialect.job_info(j) for j in doc["jobs"]]

    def jobs(self, query: JobQuery) -> list[JobInfo]:
        # slurmctld endpoints only: a job that left the controller (MinJobAge) is absent.
        self.limitations = ["slurmrestd backend: finished jobs are shown only while the controller holds them "
                            "(MinJobAge); accounting (slurmdb) is not read"] if query.finished else []
        if query.ids:
            found = [j for job_id in query.ids for j in self._job(job_id)]
        else:
            me = self.acting_user()
            records = self._records()
            found = [self.dialect.job_info(r) for r in records
                     if query.user == "*" or r.get("user_name") == (query.user or me)]
            found = [j for j in found if query.name is None or j.name == query.name]
        return [j for j in found if query.finished or not j.terminal]

    def cancel(self, ids) -> list[CancelResult]:
        return cancel_each(ids, self._job, self._delete)

    def _delete(self, job_id: str) -> str | None:
        status, doc = self.api("DELETE", f"job/{quote(job_id)}")
        return self.dialect.cancel_complaint(status, doc)
