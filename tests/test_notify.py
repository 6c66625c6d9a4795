"""`sk admin notify idle` (slurmkit/notify): which jobs left GPUs idle (sampler state files written here as the
sampler writes them; store rows as ingest writes them), the message, the once-per-run ledger, and delivery to a
real SMTP server (aiosmtpd on 127.0.0.1, tests/smtp_server.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from slurmkit.errors import SiteConfigError
from slurmkit.notify import ALREADY, FAILED, NO_ADDRESS, NOT_TRIED, SENT, WOULD_SEND, deliver, idle, ledger, mail
from slurmkit.report.figures import IDLE_UTIL_PCT
from slurmkit.site.model import load_site
from slurmkit.slurm.scontrol import parse_show_job
from slurmkit.store.db import open_store
from tests.report_store import T0, H, add_gpus, add_job
from tests.smtp_server import free_port, smtp_server

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
RUNNING = (ROOT / "tests/data/accounting/scontrol-show-job-2node-running-25.11.txt").read_text()


def write_run(state: Path, node: str, job: int, utils: list[list[float | None]], *, run: int = 0,
              cluster: str = "dev", interval: float = 10.0, t0: float = 1.7e9) -> Path:
    """A sampler's state directory as sampler.run writes it: meta.json and one line per reading; utils[k][i] is
    GPU i's utilization in reading k."""
    d = state / node / f"{cluster}-{job}-{run}"
    d.mkdir(parents=True)
    n = len(utils[0])
    meta = {"version": 1, "cluster": cluster, "job_id": job, "run": run, "node": node, "source": "simulated",
            "interval_s": interval, "started": t0,
            "gpus": [{"index": i, "uuid": f"SIMULATED-{node}-{i}", "model": "A100"} for i in range(n)]}
    (d / "meta.json").write_text(json.dumps(meta) + "\n")
    with open(d / "samples.jsonl", "w") as fh:
        for k, row in enumerate(utils):
            fh.write(json.dumps({"t": t0 + k * interval, "g": [[u, 400.0, 60.0, None] for u in row]}) + "\n")
    return d


def show(job: int, *, user: str = "alice", state: str = "RUNNING", restarts: int = 0, gpus: int = 2,
         extra: str = "") -> dict[str, str]:
    """The recorded `scontrol show job -o` of a running 25.11 job, as this job."""
    line = (RUNNING.replace("JobId=2511004", f"JobId={job}{extra}").replace("UserId=root(0)", f"UserId={user}(1001)")
            .replace("JobState=RUNNING", f"JobState={state}").replace("Restarts=0", f"Restarts={restarts}")
            .replace("gres/gpu=4,gres/gpu:a100=4 Socks", f"gres/gpu={gpus},gres/gpu:a100={gpus} Socks"))
    return parse_show_job(line)


# ------------------------------------------------------------------ idle time of a running GPU


def test_idle_time_is_the_stretch_since_the_last_busy_reading():
    assert idle.trailing_idle_s([(0, 50), (10, 0), (20, 0), (30, 0)], 10) == 30  # each reading: the time since the last
    assert idle.trailing_idle_s([(100, 0), (110, 1), (120, 0)], 10) == 30  # idle from the start: + one interval
    assert idle.trailing_idle_s([(0, 0), (10, 80)], 10) == 0  # busy now
    assert idle.trailing_idle_s([(0, 0), (10, None)], 10) == 0  # unknown now is never idle
    assert idle.trailing_idle_s([(0, 0), (10, None), (20, 0), (30, 0)], 10) == 20  # unknown ends the stretch
    assert idle.trailing_idle_s([(0, 0), (10, IDLE_UTIL_PCT)], 10) == 0  # the threshold itself is not idle
    assert idle.trailing_idle_s([], 10) == 0


def test_running_job_with_an_idle_gpu_is_found_and_its_busy_gpu_is_not(tmp_path):
    # GPU 0 works throughout; GPU 1 worked for 10 readings, then idled for 60 (600 s).
    write_run(tmp_path, "gpu01", 41, [[90.0, 70.0]] * 10 + [[88.0, 0.0]] * 60)
    calls = []
    jobs, notes = idle.running_idle(str(tmp_path), 300, "dev", lambda j: calls.append(j) or show(j))
    assert notes == [] and calls == [41]
    [job] = jobs
    assert (job.key, job.phase, job.user, job.gpus, job.state) == (("dev", 41, 0), "running", "alice", 2, "RUNNING")
    [g] = job.idle
    assert (g.node, g.index, g.uuid, g.idle_s) == ("gpu01", 1, "SIMULATED-gpu01-1", 600.0)
    assert g.util_mean == pytest.approx(10.0, abs=0.01)  # 10 of 70 readings at 70 %
    assert job.source == "simulated" and job.partition == "gpu"
    # Not idle long enough: nothing, and Slurm is not asked.
    calls.clear()
    assert idle.running_idle(str(tmp_path), 601, "dev", lambda j: calls.append(j) or show(j))[0] == []
    assert calls == []


def test_a_multi_node_job_is_one_notice_with_the_idle_gpus_of_every_node(tmp_path):
    write_run(tmp_path, "gpu01", 42, [[0.0, 95.0]] * 40)
    write_run(tmp_path, "gpu02", 42, [[0.0, 0.0]] * 40)
    [job], _ = idle.running_idle(str(tmp_path), 300, "dev", lambda j: show(j, gpus=4))
    assert [(g.node, g.index) for g in job.idle] == [("gpu01", 0), ("gpu02", 0), ("gpu02", 1)]
    assert job.gpus == 4 and job.idle_s == 400.0


def test_runs_slurm_does_not_show_running_are_left_alone(tmp_path):
    idle_gpu = [[0.0]] * 40
    write_run(tmp_path, "gpu01", 50, idle_gpu)  # ended: COMPLETING (epilog still running)
    write_run(tmp_path, "gpu01", 51, idle_gpu)  # gone from Slurm
    write_run(tmp_path, "gpu01", 52, idle_gpu, run=0)  # leftover of run 0; Slurm runs the job's run 1
    write_run(tmp_path, "gpu01", 53, idle_gpu, cluster="other")  # another cluster's state
    write_run(tmp_path, "gpu01", 54, idle_gpu)  # already noticed
    (tmp_path / "gpu01" / ".orphan-dev-55-0").mkdir()  # claimed by a prolog: not live
    (tmp_path / "gpu01" / "dev-56-0").mkdir()  # sampler started, no meta yet

    def scontrol(job: int) -> dict[str, str]:
        if job == 51:
            raise RuntimeError("scontrol show job 51 exited 1: slurm_load_jobs error: Invalid job id specified")
        return show(job, state="COMPLETING" if job == 50 else "RUNNING", restarts=1 if job == 52 else 0)

    jobs, notes = idle.running_idle(str(tmp_path), 60, "dev", scontrol, skip=lambda key: key == ("dev", 54, 0))
    assert jobs == []
    assert len(notes) == 2
    assert "job 51: Slurm does not show it running" in notes[0] and "Invalid job id" in notes[0]
    assert "cluster 'other'" in notes[1]


def test_an_unreadable_state_dir_is_a_note(tmp_path):
    jobs, notes = idle.running_idle(str(tmp_path / "missing"), 60, "dev", show)
    assert jobs == [] and "cannot read the sampler state directory" in notes[0]


def test_an_array_task_is_named_by_its_array_id_and_its_own_job_id(tmp_path):
    write_run(tmp_path, "gpu01", 130, [[0.0]] * 40)
    [job], _ = idle.running_idle(str(tmp_path), 60, "dev",
                                 lambda j: show(j, gpus=1, extra=" ArrayJobId=126 ArrayTaskId=4"))
    assert (job.ref, job.array_job_id, job.array_task_id) == ("126_4", 126, 4)
    text = mail.compose(job, None, "alice@example.edu").get_content()
    assert "job 126_4 (job id 130)" in text and "sk cancel 126_4" in text


# ------------------------------------------------------------------ finished jobs, from the store


@pytest.fixture
def store(tmp_path):
    s = open_store(str(tmp_path / "acc.db"))
    yield s
    s.close()


def test_finished_jobs_with_idle_gpus_come_from_the_store(store):
    add_job(store, 1, user="alice", gpus=4, start=T0, end=T0 + 2 * H)  # two of four GPUs idle for 2 h
    add_gpus(store, 1, [80, 80, 0.4, 1.0], idle=[0.1, 0.1, 1.0, 0.75])
    add_job(store, 2, user="bob", gpus=1, start=T0, end=T0 + 2 * H)  # busy
    add_gpus(store, 2, [50], idle=[0.2])
    add_job(store, 3, user="bob", gpus=1, start=T0, end=T0 + 600)  # idle, but only for 10 minutes
    add_gpus(store, 3, [0.0], idle=[1.0])
    add_job(store, 4, user="bob", gpus=1, start=T0 - 5 * H, end=T0 - 3 * H)  # idle, ended before --since
    add_gpus(store, 4, [0.0], idle=[1.0])
    add_job(store, 5, user="carol", gpus=2, start=T0, end=T0 + 2 * H)  # no metrics: unknown is not idle
    add_job(store, 6, user="dave", gpus=1, start=T0, end=T0 + 2 * H, run=0)  # requeued: each run on its own
    add_gpus(store, 6, [0.0], idle=[1.0], run=0)
    add_job(store, 6, user="dave", gpus=1, start=T0 + 3 * H, end=T0 + 5 * H, run=1)
    add_gpus(store, 6, [0.0], idle=[1.0], run=1)
    jobs = idle.finished_idle(store, T0 - H, 3600)
    assert [j.key for j in jobs] == [("dev", 1, 0), ("dev", 6, 0), ("dev", 6, 1)]
    j1 = jobs[0]
    assert (j1.phase, j1.user, j1.gpus, j1.state, j1.source) == ("finished", "alice", 4, "COMPLETED", "simulated")
    assert [(g.index, g.idle_s, g.util_mean) for g in j1.idle] == [(2, 7200.0, 0.4), (3, 5400.0, 1.0)]
    assert j1.idle_s == 7200.0
    # Already noticed runs are left out; --until bounds the window.
    assert [j.key for j in idle.finished_idle(store, T0 - H, 3600, skip=lambda k: k[1] == 6)] == [("dev", 1, 0)]
    assert [j.key for j in idle.finished_idle(store, T0 - H, 3600, until=T0 + 3 * H)] == [("dev", 1, 0),
                                                                                          ("dev", 6, 0)]


# ------------------------------------------------------------------ the message


def test_the_message_names_the_job_its_gpus_how_long_and_what_to_do(store):
    add_job(store, 1, user="alice", gpus=4, start=T0, end=T0 + 2 * H)
    add_gpus(store, 1, [80, 80, 0.4, 1.0], idle=[0.1, 0.1, 1.0, 0.75])
    [job] = idle.finished_idle(store, T0 - H, 3600)
    msg = mail.compose(job, None, "alice@example.edu")
    text = msg.get_content()
    assert msg["Subject"] == "[dev] job 1 (job1): 2 of 4 GPUs idle for 2 h 00 min"
    assert msg["To"] == "alice@example.edu" and msg["X-Slurmkit-Job"] == "dev/1/0"
    assert "your job 1 (job1) on dev (partition gpu, nodes gpu01) ended (COMPLETED), and 2 of its 4 GPUs were " \
        "idle (utilization below 5 %)" in " ".join(text.split())
    assert "gpu01          2  2 h 00 min   0.4 %" in text and "gpu01          3  1 h 30 min   1.0 %" in text
    assert "request gpus: 2" in " ".join(text.split())
    assert "SIMULATED" in text
    assert all(len(line) <= 80 for line in text.splitlines())


def test_recipient_is_the_mapping_else_user_at_domain():
    cfg = type("N", (), {"addresses": {"alice": "a.smith@uni.example"}, "domain": "example.edu"})()
    assert mail.recipient(cfg, "alice") == "a.smith@uni.example"
    assert mail.recipient(cfg, "bob") == "bob@example.edu"
    cfg.domain = None
    assert mail.recipient(cfg, "bob") is None
    assert mail.recipient(None, "bob") is None and mail.recipient(cfg, None) is None


def test_durations_in_words():
    assert [mail.duration_words(s) for s in (42, 60, 3725, 86400, 3 * 86400 + 7200)] == [
        "42 s", "1 min", "1 h 02 min", "24 h 00 min", "3 d 2 h"]


# ------------------------------------------------------------------ once per run, and delivery


def _notice(job_id: int = 7, run: int = 0) -> ledger.Notice:
    return ledger.Notice(ledger.IDLE_GPUS, "dev", job_id, run, "alice", "alice@example.edu", "running", 1, 600.0,
                         "<m@x>")


def _ledger_cases(store) -> None:
    sends = []
    assert ledger.send_once(store, _notice(), lambda: sends.append(1)) is True
    assert ledger.send_once(store, _notice(), lambda: sends.append(2)) is False  # recorded: never again
    assert sends == [1]
    assert ledger.send_once(store, _notice(run=1), lambda: sends.append(3)) is True  # the requeued run is new

    def fail() -> None:
        raise mail.SendError("451 try again")

    with pytest.raises(mail.SendError):
        ledger.send_once(store, _notice(job_id=8), fail)
    assert ("dev", 8, 0) not in ledger.sent_keys(store)  # rolled back: retried by the next run
    assert ledger.send_once(store, _notice(job_id=8), lambda: sends.append(4)) is True
    assert sends == [1, 3, 4]
    assert ledger.sent_keys(store) == {("dev", 7, 0), ("dev", 7, 1), ("dev", 8, 0)}


def test_a_run_is_sent_once_and_a_failed_send_is_not_recorded(store):
    _ledger_cases(store)


@pytest.mark.postgres
def test_the_ledger_on_postgresql(pg_schema_url):
    with open_store(pg_schema_url()) as store:
        _ledger_cases(store)


def test_an_unmigrated_store_has_sent_nothing(tmp_path):
    with open_store(str(tmp_path / "old.db"), migrate=False) as store:
        assert ledger.sent_keys(store) == set()


def _site_notify(port: int, **extra):
    fields = {"smtp_host": "127.0.0.1", "smtp_port": port, "sender": "GPU notices <gpu@example.edu>",
              "domain": "example.edu", "timeout_s": 5, **extra}
    return type("N", (), {"addresses": {}, "ssl": False, "starttls": False, "smtp_user": None, **fields})()


def _jobs(store, n: int = 2) -> list[idle.IdleJob]:
    for i in range(1, n + 1):
        add_job(store, i, user=f"user{i}", gpus=1, start=T0, end=T0 + 2 * H)
        add_gpus(store, i, [0.0], idle=[1.0])
    return idle.finished_idle(store, T0 - H, 3600)


def test_delivery_to_a_real_smtp_server_once_and_again_after_a_refusal(store):
    jobs = _jobs(store)
    with smtp_server(refuse=1) as (server, port):
        cfg = _site_notify(port)
        first = deliver(store, jobs, cfg, dry_run=False, mailer=mail.Mailer(cfg))
        assert [o.status for o in first] == [FAILED, SENT]  # the refusal is one message's, not the server's end
        assert "451" in first[0].error
        assert [r.recipients for r in server.received] == [["user2@example.edu"]]
        second = deliver(store, jobs, cfg, dry_run=False, mailer=mail.Mailer(cfg), sent=ledger.sent_keys(store))
        assert [o.status for o in second] == [SENT, ALREADY]
        assert [r.recipients for r in server.received] == [["user2@example.edu"], ["user1@example.edu"]]
        got = server.received[1].message
        assert got["Subject"].startswith("[dev] job 1 (job1): 1 of 1 GPU idle for 2 h 00 min")
        assert got["From"] == "GPU notices <gpu@example.edu>" and server.received[1].sender == "gpu@example.edu"
    with store:
        rows = store.execute("SELECT job_id, recipient, phase, idle_gpus, message_id FROM notices "
                             "ORDER BY job_id").fetchall()
    assert rows == [(1, "user1@example.edu", "finished", 1, got["Message-ID"]),
                    (2, "user2@example.edu", "finished", 1, str(first[1].message["Message-ID"]))]


def test_an_unreachable_server_sends_and_records_nothing(store):
    jobs = _jobs(store, 3)
    cfg = _site_notify(free_port())  # nobody listens
    out = deliver(store, jobs, cfg, dry_run=False, mailer=mail.Mailer(cfg))
    assert [o.status for o in out] == [FAILED, NOT_TRIED, NOT_TRIED]
    assert "127.0.0.1" in out[0].error and ledger.sent_keys(store) == set()


def test_no_address_and_dry_run(store):
    jobs = _jobs(store, 1)
    cfg = _site_notify(free_port(), domain=None)
    [o] = deliver(store, jobs, cfg, dry_run=False, mailer=mail.Mailer(cfg))
    assert o.status == NO_ADDRESS and "notify.domain" in o.error and ledger.sent_keys(store) == set()
    [o] = deliver(store, jobs, _site_notify(1), dry_run=True)
    assert o.status == WOULD_SEND and o.recipient == "user1@example.edu" and ledger.sent_keys(store) == set()


@pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")
def test_smtp_login_with_the_password_file(store, tmp_path):
    jobs = _jobs(store, 1)
    with smtp_server(login=("notifier", "s3cret")) as (server, port):
        for password, status in (("wrong", FAILED), ("s3cret", SENT)):
            cfg = _site_notify(port, smtp_user="notifier")
            [o] = deliver(store, jobs, cfg, dry_run=False, mailer=mail.Mailer(cfg, password))
            assert o.status == status, o.error
        assert len(server.received) == 1


# ------------------------------------------------------------------ site config and command line


def _site(tmp_path: Path, notify: dict | None, **accounting) -> Path:
    data = yaml.safe_load((ROOT / "site_config" / "devcluster.yaml").read_text())
    data["accounting"] = {**data["accounting"], "store": str(tmp_path / "acc.db"),
                          "state_dir": str(tmp_path / "state"), **accounting}
    data.pop("notify", None)
    if notify is not None:
        data["notify"] = notify
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_notify_section_errors_name_each_key(tmp_path):
    path = _site(tmp_path, {"sender": "nobody", "smtp_port": 70000, "idle_for": "soon", "domain": "exa mple",
                            "addresses": {"alice": "alice"}, "smtp_hots": "x"})
    with pytest.raises(SiteConfigError) as err:
        load_site(path)
    keys = {p.key: p for p in err.value.problems}
    assert set(keys) == {"notify.sender", "notify.smtp_port", "notify.idle_for", "notify.domain",
                         "notify.addresses.alice", "notify.smtp_hots"}
    assert all(p.file == str(path) and p.line for p in keys.values())
    assert "is not a length of time" in keys["notify.idle_for"].message
    for bad, why in (({"starttls": True, "ssl": True}, "choose one"),
                     ({"smtp_user": "me"}, "smtp_user and smtp_password_file go together")):
        with pytest.raises(SiteConfigError, match=why):
            load_site(_site(tmp_path, {"sender": "a@example.edu", **bad}))
    site = load_site(_site(tmp_path, {"sender": "GPU notices <gpu@example.edu>"}))
    assert (site.notify.smtp_host, site.notify.idle_for, site.notify.smtp_port) == ("localhost", "1h", None)


def sk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([SK, "admin", "notify", "idle", *args], capture_output=True, text=True, timeout=120)


def _finished_store(tmp_path: Path) -> None:
    with open_store(str(tmp_path / "acc.db")) as s:
        add_job(s, 9, user="alice", gpus=2, start=T0, end=T0 + 2 * H, cluster="devcluster")
        add_gpus(s, 9, [90, 0.0], idle=[0.0, 1.0], cluster="devcluster")


def test_cli_sends_once_retries_a_refused_message_and_prints_a_dry_run(tmp_path):
    _finished_store(tmp_path)
    since = str(T0 - H)
    with smtp_server(refuse=1) as (server, port):
        site = str(_site(tmp_path, {"sender": "GPU notices <gpu@example.edu>", "smtp_host": "127.0.0.1",
                                    "smtp_port": port, "domain": "example.edu", "idle_for": "1h"}))
        dry = sk("--site", site, "--since", since, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "To: alice@example.edu" in dry.stdout and "Subject: [devcluster] job 9 (job9): 1 of 2 GPUs idle" \
            in dry.stdout and "request gpus: 1" in dry.stdout and "dry run: nothing was sent" in dry.stdout
        refused = sk("--site", site, "--since", since)
        assert refused.returncode == 1 and "failed: job 9" in refused.stderr and "451" in refused.stderr
        assert server.received == [] and server.refused == 1
        ok = sk("--site", site, "--since", since, "--json")
        assert ok.returncode == 0, ok.stderr
        [job] = json.loads(ok.stdout)["jobs"]
        assert (job["status"], job["recipient"], job["ref"], job["idle_s"]) == (SENT, "alice@example.edu", "9",
                                                                                7200.0)
        again = sk("--site", site, "--since", since)
        assert again.returncode == 0 and "0 job runs" in again.stdout and "sent to" not in again.stdout
        assert len(server.received) == 1 and server.received[0].recipients == ["alice@example.edu"]
        assert "job 9" in server.received[0].message.get_content()


def test_cli_usage_errors(tmp_path):
    _finished_store(tmp_path)
    site = str(_site(tmp_path, None))
    res = sk("--site", site)
    assert res.returncode == 2 and "notify: error: notify: there is no notify: section" in res.stderr.replace(
        site + ": ", "notify: ") and "Traceback" not in res.stderr
    assert sk("--site", site, "--dry-run", "--since", str(T0 - H)).returncode == 0  # a dry run needs no SMTP
    res = sk("--site", site, "--dry-run", "--idle-for", "soon")
    assert res.returncode == 2 and "--idle-for" in res.stderr
    res = sk("--site", site, "--dry-run", "--since", "someday")
    assert res.returncode == 2 and "--since" in res.stderr
    site = str(_site(tmp_path, {"sender": "a@example.edu", "smtp_user": "me", "smtp_password_file": "nosuch"}))
    res = sk("--site", site)
    assert res.returncode == 2 and "notify.smtp_password_file" in res.stderr and "Traceback" not in res.stderr


def test_running_and_finished_in_one_run_never_notice_a_run_twice(tmp_path):
    """A job noticed while running is not noticed again once it has ended and been ingested."""
    _finished_store(tmp_path)
    with open_store(str(tmp_path / "acc.db")) as s:
        ledger.send_once(s, ledger.Notice(ledger.IDLE_GPUS, "devcluster", 9, 0, "alice", "alice@example.edu",
                                          "running", 1, 3600.0, None), lambda: None, now=time.time())
    site = str(_site(tmp_path, {"sender": "a@example.edu", "domain": "example.edu"}))
    res = sk("--site", site, "--since", str(T0 - H), "--dry-run", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["jobs"] == []
    with open_store(str(tmp_path / "acc.db")) as s:
        s.execute("DELETE FROM notices")
    res = sk("--site", site, "--since", str(T0 - H), "--dry-run", "--json")
    assert [j["status"] for j in json.loads(res.stdout)["jobs"]] == [WOULD_SEND]  # the same job, unnoticed
