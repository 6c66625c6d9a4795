"""A real SMTP server for the notify tests: aiosmtpd on 127.0.0.1 and a free port, keeping what it received.

`refuse` answers the next N messages' DATA with a temporary failure (451), as a relay under load does; the
message is then not delivered and the sender must try again later.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage


@dataclass
class Received:
    sender: str
    recipients: list[str]
    message: EmailMessage


@dataclass
class Handler:
    received: list[Received] = field(default_factory=list)
    refuse: int = 0
    refused: int = 0
    refuse_job: str | None = None  # refuse only messages whose X-Slurmkit-Job is this (cluster/job/run)

    async def handle_DATA(self, server, session, envelope) -> str:
        msg = message_from_bytes(envelope.original_content or envelope.content, policy=policy.default)
        if self.refuse > 0 and self.refuse_job in (None, msg["X-Slurmkit-Job"]):
            self.refuse -= 1
            self.refused += 1
            return "451 4.3.0 try again later (refused by the test)"
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), msg))  # type: ignore[arg-type]
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def smtp_server(refuse: int = 0, login: tuple[str, str] | None = None,
                refuse_job: str | None = None) -> Iterator[tuple[Handler, int]]:
    """`login`: (user, password) the server requires (AUTH PLAIN/LOGIN, allowed without TLS on loopback)."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    def check(server, session, envelope, mechanism, auth_data) -> AuthResult:  # type: ignore[no-untyped-def]
        ok = isinstance(auth_data, LoginPassword) and login is not None and \
            (auth_data.login.decode(), auth_data.password.decode()) == login
        return AuthResult(success=ok)

    handler = Handler(refuse=refuse, refuse_job=refuse_job)
    port = free_port()
    auth = {"auth_required": True, "auth_require_tls": False, "authenticator": check} if login else {}
    controller = Controller(handler, hostname="127.0.0.1", port=port, **auth)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()
