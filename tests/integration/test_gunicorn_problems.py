"""gunicorn's own refusals under /api/v1/ (414, 431, 400) are problem+json, on a real `serve` (issue 33)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from etlsite import gunicorn_workers
from scheduler.api import errors as api_errors
from tests.integration.cluster import ROOT, answers, child_database_url, wait_until
from tests.throwaway import free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
LONG = "a" * 9000  # past gunicorn's 8,190 bytes of request line and of header field


@pytest.fixture(scope="module", params=["gevent", "gthread"])
def server(request, tmp_path_factory, django_db_blocker):
    tmp = tmp_path_factory.mktemp(f"serve-{request.param}")
    with django_db_blocker.unblock():
        url = child_database_url()
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DEBUG": "false",
        "STATIC_ROOT": str(tmp / "s"),
        "ETL_WEB_WORKERS": "1",
        "ETL_WEB_WORKER_CLASS": request.param,
    }
    log = open(tmp / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--no-cluster", "--addr", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_until(
            lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"),
            timeout=60,
            what="the web server",
            log_path=tmp / "serve.log",
        )
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()


def _raw(port: int, head: str) -> tuple[int, dict[str, str], bytes]:
    """Send a request head as written; (status, headers, body) of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head.encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    top, _, body = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _problem(answer, status: int) -> dict:
    code, headers, body = answer
    assert code == status, body[:300]
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    expected = json.loads(api_errors.problem(status, "").content)  # the type and title the API gives any error
    assert (problem["type"], problem["title"], problem["status"]) == (expected["type"], expected["title"], status)
    assert problem["detail"]
    return problem


def test_an_over_long_api_request_line_is_a_414_problem(server):
    problem = _problem(_raw(server, f"GET /api/v1/schedules?name={LONG} HTTP/1.1\r\nHost: x\r\n\r\n"), 414)
    assert "8190 bytes" in problem["detail"]
    # absolute form too
    _problem(_raw(server, f"GET http://x/api/v1/runs?{LONG} HTTP/1.1\r\nHost: x\r\n\r\n"), 414)


def test_an_over_long_or_excessive_api_header_is_a_431_problem(server):
    _problem(_raw(server, f"GET /api/v1/schedules HTTP/1.1\r\nHost: x\r\nX-Big: {LONG}\r\n\r\n"), 431)
    many = "".join(f"X-H{i}: v\r\n" for i in range(150))
    _problem(_raw(server, f"GET /api/v1/runs HTTP/1.1\r\nHost: x\r\n{many}\r\n"), 431)


def test_a_malformed_api_request_head_is_a_400_problem(server):
    _problem(_raw(server, "GET /api/v1/runs HTTP/1.1\r\nHost: x\r\nBad Header: v\r\n\r\n"), 400)


def test_the_same_refusals_elsewhere_stay_gunicorns_own(server):
    code, headers, _ = _raw(server, f"GET /accounts/login/?next={LONG} HTTP/1.1\r\nHost: x\r\n\r\n")
    assert code == 414 and headers["content-type"].startswith("text/html")
    code, headers, _ = _raw(server, "GET /api/v1x HTTP/1.1\r\nHost: x\r\nX-Big: " + LONG + "\r\n\r\n")
    assert code == 431 and headers["content-type"].startswith("text/html")


def test_the_workers_speak_as_the_api_does():
    assert gunicorn_workers.API_PREFIX == api_errors.PREFIX and gunicorn_workers.TYPE_BASE == api_errors.TYPE_BASE
    assert gunicorn_workers.api_target(b"\r\nPOST /api/v1 HTTP/1.1")
    assert not gunicorn_workers.api_target(b"GET /api/v10/x HTTP/1.1") and not gunicorn_workers.api_target(b"GET")
