"""Slow clients cannot starve the web server: 30 sockets sending a webhook body a byte at a time (issue 22)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from tests.integration.cluster import ROOT, answers, child_database_url, wait_until
from tests.throwaway import free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
SLOW_CLIENTS = 30


def _slow_webhook(port: int, stop: threading.Event, opened: list) -> None:
    """Announce a 1,000-byte webhook body and dribble it one byte at a time until told to stop."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    opened.append(sock)
    sock.sendall(b"POST /hooks/anything HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n")
    while not stop.wait(0.5):
        try:
            sock.sendall(b" ")
        except OSError:
            return  # the server gave up on this client: that is allowed too


def test_thirty_byte_at_a_time_webhook_bodies_do_not_stop_the_dashboard(tmp_path):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": child_database_url(), "DEBUG": "false", "STATIC_ROOT": str(tmp_path / "s"),
           "ETL_WEB_WORKERS": "1"}  # one worker: with threads, its 4 would all be held
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--no-cluster", "--addr", f"127.0.0.1:{port}"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    stop, opened, threads = threading.Event(), [], []
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), timeout=60, what="the web server",
                   log_path=tmp_path / "serve.log")
        for _ in range(SLOW_CLIENTS):
            thread = threading.Thread(target=_slow_webhook, args=(port, stop, opened), daemon=True)
            thread.start()
            threads.append(thread)
        wait_until(lambda: len(opened) == SLOW_CLIENTS, timeout=30, what="the slow clients",
                   log_path=tmp_path / "serve.log")
        for _ in range(3):  # the dashboard's login page still answers, again and again, while they dribble
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=10) as response:
                assert response.status == 200
    finally:
        stop.set()
        for sock in opened:
            sock.close()
        for thread in threads:
            thread.join(5)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
