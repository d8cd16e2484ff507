"""Lineage fixtures: lineage switched on, a FILE-transport client, a local HTTP receiver that can be 'down'."""
from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from openlineage.client import OpenLineageClient
from openlineage.client.transport.file import FileConfig, FileTransport
from openlineage.client.transport.http import HttpConfig, HttpTransport

from scheduler.models import LineageEvent
from scheduler.services.integrations.lineage import lineage_reset
from scheduler.services.integrations.lineage_send import lineage_client_reset


@pytest.fixture(autouse=True)
def _lineage_read_again_after_each_test():
    """Set up before every other fixture, so torn down after them all (monkeypatch's environment included).

    The OpenLineage client writes variables of its own into os.environ (OPENLINEAGE_URL becomes
    OPENLINEAGE__TRANSPORT__TRANSPORTS__DEFAULT_HTTP__*), past monkeypatch: they are taken back here, and the
    next test, in any directory, reads the environment as it really is, not with lineage left on.
    """
    before = {name: value for name, value in os.environ.items() if name.startswith("OPENLINEAGE")}
    yield
    for name in [n for n in os.environ if n.startswith("OPENLINEAGE")]:
        del os.environ[name]
    os.environ.update(before)
    lineage_reset()
    lineage_client_reset()


@pytest.fixture
def lineage_on(settings):
    settings.ETL_LINEAGE = "on"
    yield settings
    lineage_reset()
    lineage_client_reset()


class FileLineage:
    """A client writing every event as one JSON line to `path`; `events()` reads them back."""

    def __init__(self, path) -> None:
        self.path = path
        self.client = OpenLineageClient(transport=FileTransport(FileConfig(log_file_path=str(path), append=True)))

    def events(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


@pytest.fixture
def file_lineage(tmp_path):
    return FileLineage(tmp_path / "lineage.jsonl")


class Receiver:
    """An OpenLineage HTTP endpoint on 127.0.0.1: answers 201 and keeps each event, or 503 while `down`."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.down = False
        self.tries = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.tries += 1
                if receiver.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                receiver.events.append({"path": self.path, **json.loads(body)})
                self.send_response(201)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def client(self) -> OpenLineageClient:
        # no retries inside the transport: the outbox's own back-off is what is under test
        config = HttpConfig.from_dict({"url": self.url, "timeout": 5, "retry": {"total": 0, "connect": 0, "read": 0}})
        return OpenLineageClient(transport=HttpTransport(config))

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.stop()


class ReceiverLineage:
    """The HTTP receiver seen as `FileLineage` is: a client, and the events it received (without the path)."""

    def __init__(self, server: Receiver) -> None:
        self.server = server
        self.client = server.client()

    def events(self) -> list[dict]:
        assert {e["path"] for e in self.server.events} <= {"/api/v1/lineage"}
        return [{k: v for k, v in e.items() if k != "path"} for e in self.server.events]


@pytest.fixture(params=["file", "http"])
def transport(request, tmp_path):
    """Each case twice: through the file transport, and through the HTTP transport to a local receiver."""
    if request.param == "file":
        yield FileLineage(tmp_path / "lineage.jsonl")
        return
    server = Receiver()
    yield ReceiverLineage(server)
    server.stop()


def outbox() -> list[tuple[str, str]]:
    """(event type, job name) of every outbox row, oldest first."""
    return list(LineageEvent.objects.order_by("id").values_list("event_type", "job_name"))
