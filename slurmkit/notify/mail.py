"""The idle-GPU notice as a plain-text mail, its recipient, and the SMTP connection it goes out on.

Standard library only (email, smtplib, ssl), imported by `sk admin notify idle` alone.
"""

from __future__ import annotations

import smtplib
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any

from slurmkit.config.when import span_seconds
from slurmkit.errors import InputError, Problem
from slurmkit.notify.idle import IdleJob
from slurmkit.report.figures import IDLE_UTIL_PCT

DEFAULT_IDLE_FOR = "1h"  # without a notify: section (dry runs); the model's default says the same


def recipient(notify: Any | None, user: str | None) -> str | None:
    """The owner's address: notify.addresses[user], else user@notify.domain; None when neither is configured."""
    if not user or notify is None:
        return None
    if user in notify.addresses:
        return notify.addresses[user]
    return f"{user}@{notify.domain}" if notify.domain else None


def duration_words(seconds: float) -> str:
    """3725 -> '1 h 02 min'; under a minute in seconds, beyond two days in days and hours."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    minutes, hours, days = s // 60 % 60, s // 3600 % 24, s // 86400
    if days >= 2:
        return f"{days} d {hours} h"
    hours += 24 * days
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min"


def _advice(job: IdleJob) -> list[str]:
    busy = job.gpus - len(job.idle)
    ref = job.ref
    if busy > 0:
        first = (f"* If the job needs only the GPUs that worked, ask for {busy}: request gpus: {busy} in the job spec "
                 f"(sbatch --gpus={busy}), and the other {len(job.idle)} are free for other jobs.")
    else:
        verb = "is" if job.phase == "running" else "was"
        first = (f"* None of its GPUs {verb} working: check that the program uses a GPU at all (a CPU-only "
                 "program belongs in a job without GPUs), and that it is not stuck waiting for input or another "
                 "rank.")
    lines = [first,
             "* If every GPU should be working, check that each rank sees its own GPU (run `sk doctor` inside "
             "the job) and that the data loader keeps up."]
    if job.phase == "running":
        lines.append(f"* If the job is stuck, cancel it: sk cancel {ref}")
    lines.append(f"* Its GPU figures{' once it has ended' if job.phase == 'running' else ''}: sk report job {ref}")
    return lines


def _which(job: IdleJob) -> tuple[str, bool]:
    """('3 of its 4 GPUs', plural) / ('all 4 of its GPUs', True) / ('its GPU', False)."""
    n, total = len(job.idle), job.gpus
    if n == total == 1:
        return "its GPU", False
    if n >= total:
        return f"all {total} of its GPUs", True
    return f"{n} of its {total} GPUs", n != 1


def _wrap(text: str, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(text, 76, subsequent_indent=indent, break_on_hyphens=False) or [""]


def compose(job: IdleJob, notify: Any | None, to: str | None, *, idle_pct: float = IDLE_UTIL_PCT) -> EmailMessage:
    """The notice for one job run: subject and plain-text body name the job, its idle GPUs, for how long, and
    what to do."""
    name = f" ({job.job_name})" if job.job_name else ""
    which, plural = _which(job)
    if job.phase == "running":
        verb = "have been idle" if plural else "has been idle"
    else:
        verb = "were idle" if plural else "was idle"
    msg = EmailMessage()
    msg["Subject"] = (f"[{job.cluster}] job {job.ref}{name}: {len(job.idle)} of {job.gpus} "
                      f"GPU{'s' if job.gpus != 1 else ''} idle for {duration_words(job.idle_s)}")
    sender = notify.sender if notify is not None else "slurmkit (no notify.sender configured)"
    msg["From"] = sender
    msg["To"] = to or f"{job.user} (no address: set notify.domain or notify.addresses)"
    msg["Date"] = formatdate(localtime=True)
    domain = parseaddr(sender)[1].rpartition("@")[2] or None
    msg["Message-ID"] = make_msgid("sk-idle", domain=domain)
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: vacation responders stay quiet
    msg["X-Slurmkit-Job"] = f"{job.cluster}/{job.job_id}/{job.run}"
    ident = f"job {job.ref}" + (f" (job id {job.job_id})" if job.ref != str(job.job_id) else "")
    if job.run:
        ident += f", run {job.run} (requeued)"
    where = ", ".join(x for x in (f"partition {job.partition}" if job.partition else "",
                                  f"nodes {job.nodes}" if job.nodes else "") if x)
    state = "is running" if job.phase == "running" else f"ended ({job.state})" if job.state else "ended"
    body = [f"Hello {job.user},", ""]
    body += _wrap(f"your {ident}{name} on {job.cluster}{' (' + where + ')' if where else ''} {state}, and {which} "
                  f"{verb} (utilization below {idle_pct:g} %):")
    body += ["", f"  {'node':<12} {'GPU':>3}  {'idle for':<12} mean utilization"]
    for g in job.idle:
        util = "-" if g.util_mean is None else f"{g.util_mean:.1f} %"
        body.append(f"  {g.node:<12} {g.index:>3}  {duration_words(g.idle_s):<12} {util}")
    body += ["", *_wrap("A GPU allocated to a job is unavailable to everyone else, working or not. What to do:"),
             ""]
    for line in _advice(job):
        body += _wrap(line, "  ")
    body.append("")
    if job.source and "simulated" in job.source:
        body += ["[These are SIMULATED metrics, not measurements of real GPUs.]", ""]
    body += _wrap(f"You get one notice per job. Idle means utilization below {idle_pct:g} % as sampled on the "
                  "nodes.")
    body += ["-- ", f"slurmkit on {job.cluster}"]
    msg.set_content("\n".join(body) + "\n")
    return msg


def idle_for_seconds(text: str, *, option: str) -> int:
    seconds = span_seconds(text)
    if not seconds:
        raise InputError(Problem(f"{text!r} is not a length of time", key=option, hint="use e.g. 30m, 1h or 2d"))
    return seconds


class SendError(Exception):
    """A message was not accepted. `connection`: the server could not be reached at all (the rest of this run's
    messages would fail the same way)."""

    def __init__(self, message: str, *, connection: bool = False) -> None:
        super().__init__(message)
        self.connection = connection


class Mailer:
    """One SMTP connection for a run's notices, opened at the first message; after an error the next message
    opens a new one."""

    def __init__(self, notify: Any, password: str | None = None) -> None:
        self.notify, self.password = notify, password
        self.smtp: smtplib.SMTP | None = None

    @property
    def port(self) -> int:
        n = self.notify
        return n.smtp_port or (465 if n.ssl else 587 if n.starttls else 25)

    def _connect(self) -> smtplib.SMTP:
        import ssl

        n = self.notify
        try:
            if n.ssl:
                smtp: smtplib.SMTP = smtplib.SMTP_SSL(n.smtp_host, self.port, timeout=n.timeout_s,
                                                      context=ssl.create_default_context())
            else:
                smtp = smtplib.SMTP(n.smtp_host, self.port, timeout=n.timeout_s)
            if n.starttls:
                smtp.starttls(context=ssl.create_default_context())
            if n.smtp_user:
                smtp.login(n.smtp_user, self.password or "")
        except (OSError, smtplib.SMTPException) as exc:
            raise SendError(f"SMTP server {n.smtp_host}:{self.port}: {_why(exc)}", connection=True) from exc
        return smtp

    def send(self, msg: EmailMessage) -> None:
        if self.smtp is None:
            self.smtp = self._connect()
        try:
            refused = self.smtp.send_message(msg)
        except (OSError, smtplib.SMTPException) as exc:
            self.close()
            raise SendError(f"SMTP server {self.notify.smtp_host}:{self.port} did not take the message for "
                            f"{msg['To']}: {_why(exc)}") from exc
        if refused:  # only with several recipients; a notice has one
            raise SendError(f"refused recipients: {refused}")

    def close(self) -> None:
        if self.smtp is not None:
            try:
                self.smtp.quit()
            except (OSError, smtplib.SMTPException):
                self.smtp.close()
            self.smtp = None


def _why(exc: BaseException) -> str:
    """The server's own words (code and text) where it gave any."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return "; ".join(f"{rcpt}: {code} {text.decode(errors='replace') if isinstance(text, bytes) else text}"
                         for rcpt, (code, text) in exc.recipients.items())
    code, text = getattr(exc, "smtp_code", None), getattr(exc, "smtp_error", None)
    if code is not None:
        return f"{code} {text.decode(errors='replace') if isinstance(text, bytes) else text}"
    return str(exc) or type(exc).__name__


def read_password(site: Any) -> str | None:
    """The SMTP password from notify.smtp_password_file (relative to the site config); a located error when it
    cannot be read."""
    n = site.notify
    if not n.smtp_password_file:
        return None
    path = site.resolve_path(n.smtp_password_file)
    try:
        return path.read_text().strip("\r\n")
    except OSError as exc:
        raise InputError(Problem(f"cannot read the SMTP password file {path}: {exc.strerror}",
                                 file=site.source_file, key="notify.smtp_password_file",
                                 hint="run as the user that may read it (mode 0600), or fix the path")) from exc
