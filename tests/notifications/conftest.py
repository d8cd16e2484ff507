"""A local HTTP receiver (127.0.0.1) for json:// and etlhook:// channels, and settings that make delivery inline."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from scheduler.services.oversight import alerts
from scheduler.services.integrations import channels


class Receiver:
    """Records every POST (headers and body) and answers with scripted statuses (200 when none is left); a
    status may be (3xx, Location) to answer with a redirect."""

    def __init__(self, statuses=()):
        self.requests: list[dict] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                location = None
                if isinstance(status, tuple):  # (3xx, Location)
                    status, location = status
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, scheme: str = "json", path: str = "/alerts") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    servers: list[Receiver] = []

    def make(statuses=()):
        servers.append(Receiver(statuses))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def inline_alerts(settings, monkeypatch):
    settings.ETL_ALERTS_SYNC = True
    settings.ETL_ALERT_ALLOW_PRIVATE_URLS = True  # the receivers listen on 127.0.0.1; tests of the guard turn it off
    settings.ETL_ALERT_URLS = []
    settings.ETL_ALERT_EMAILS = []
    settings.ETL_ALERT_WEBHOOK_URL = ""
    settings.ETL_ALERT_WEBHOOK_SECRET = ""
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    monkeypatch.setattr(channels, "WEBHOOK_WAIT", 0.0)
    monkeypatch.setattr(alerts, "_last_watchdog", None)
