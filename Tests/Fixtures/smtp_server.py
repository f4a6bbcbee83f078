#!/usr/bin/env python3
"""A local SMTP server for Frienso's tests (Debian's python3-aiosmtpd).

STARTTLS is required before anything else, and AUTH (PLAIN or LOGIN) after it, as a real relay
on port 587 requires. Every message accepted is appended to --out as one JSON object per line
(envelope, content, whether TLS and AUTH were used). --fail-first N answers the first N RCPT
commands with 451 (a greylist); --reject ADDRESS refuses that recipient with 550.
"""
import argparse
import json
import signal
import ssl

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--cert", required=True)
parser.add_argument("--key", required=True)
parser.add_argument("--user", required=True)
parser.add_argument("--password", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--fail-first", type=int, default=0)
parser.add_argument("--reject", action="append", default=[])
args = parser.parse_args()


class Handler:
    def __init__(self):
        self.failures = args.fail_first
        self.queued = 0

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address in args.reject:
            return "550 5.1.1 <%s>: Recipient address rejected: User unknown" % address
        if self.failures > 0:
            self.failures -= 1
            return "451 4.7.1 <%s>: Recipient address rejected: Greylisted, try again later" % address
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"

    async def handle_DATA(self, server, session, envelope):
        self.queued += 1
        record = {
            "mail_from": envelope.mail_from,
            "rcpt_tos": envelope.rcpt_tos,
            "content": envelope.content.decode("utf-8", "replace"),
            "tls": session.ssl is not None,
            "authenticated": bool(session.authenticated),
            "helo": session.host_name,
        }
        with open(args.out, "a") as out:
            out.write(json.dumps(record) + "\n")
        return "250 2.0.0 Ok: queued as FRIENSO%04d" % self.queued


def authenticator(server, session, envelope, mechanism, auth_data):
    ok = (isinstance(auth_data, LoginPassword)
          and auth_data.login.decode() == args.user and auth_data.password.decode() == args.password)
    return AuthResult(success=ok, handled=False)


context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(args.cert, args.key)
controller = Controller(Handler(), hostname="127.0.0.1", port=args.port, tls_context=context, require_starttls=True,
                        authenticator=authenticator, auth_required=True, auth_require_tls=True)
controller.start()
print("ready on port %d" % args.port, flush=True)
try:
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
finally:
    controller.stop()
