"""`manage.py serve` brings up web + cluster together; SIGINT (Ctrl-C) stops both cleanly."""
import os
import signal
import subprocess
import sys
import urllib.request

import pytest

from scheduler.models import LoopLease
from tests.integration.cluster import ROOT, answers, child_database_url, wait_until
from tests.throwaway import free_port

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _head(url: str) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=2) as response:
        return response.status, dict(response.headers)


def test_serve_answers_on_gunicorn_with_static_files_and_debug_off(tmp_path):
    """ETL_ADDR picks the address; the stylesheet and htmx come from WhiteNoise, as in production."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": child_database_url(), "DEBUG": "false", "ETL_ADDR": f"127.0.0.1:{port}",
           "STATIC_ROOT": str(tmp_path / "static")}
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--no-cluster"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), timeout=60, what="the web server",
                   log_path=tmp_path / "serve.log")
        status, headers = _head(f"http://127.0.0.1:{port}/accounts/login/")
        assert headers.get("Server", "").startswith("gunicorn")
        status, headers = _head(f"http://127.0.0.1:{port}/static/scheduler/app.css")
        assert status == 200 and headers["Content-Type"].startswith("text/css")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as response:
            html = response.read().decode()
        htmx = html.split('<script src="', 1)[1].split('"', 1)[0]
        assert _head(f"http://127.0.0.1:{port}{htmx}")[0] == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)



def test_gunicorn_started_without_collectstatic_still_serves_the_static_files(tmp_path):
    """An empty STATIC_ROOT (the web server started some other way than `serve`, which collects first): WhiteNoise
    finds the CSS, htmx and the admin's files in the apps themselves, with DEBUG off."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": child_database_url(), "DEBUG": "false",
           "STATIC_ROOT": str(tmp_path / "empty")}
    log = open(tmp_path / "gunicorn.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "etlsite.wsgi", "--bind", f"127.0.0.1:{port}",
                             "--workers", "1"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), timeout=60, what="gunicorn",
                   log_path=tmp_path / "gunicorn.log")
        for path, kind in (("scheduler/app.css", "text/css"), ("django_htmx/htmx-2.min.js", "javascript"),
                           ("admin/css/base.css", "text/css")):
            status, headers = _head(f"http://127.0.0.1:{port}/static/{path}")
            assert status == 200 and kind in headers["Content-Type"], (path, status, headers)
        assert not (tmp_path / "empty").exists()  # nothing was collected: the files came from the finders
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)

def test_a_bad_addr_is_refused_with_the_option_named(tmp_path):
    result = subprocess.run([sys.executable, "manage.py", "serve", "--addr", "localhost:http"], cwd=ROOT,
                            env={**os.environ, "DATABASE_URL": child_database_url()}, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode != 0
    assert "--addr: expected HOST:PORT" in result.stderr


def test_ctrl_c_stops_the_web_server_and_the_cluster(tmp_path):
    port = free_port()
    logins = tmp_path / "demo-logins.txt"
    logins.write_text("login: operator / s3cret-pw   (team ingest ...)\n")
    env = {**os.environ, "DATABASE_URL": child_database_url(), "ETL_GOVERNANCE_INTERVAL": "1",
           "STATIC_ROOT": str(tmp_path / "static"), "ETL_DEMO_LOGINS_FILE": str(logins)}
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/accounts/login/"), timeout=60, what="the web server",
                   log_path=tmp_path / "serve.log")
        # dispatch, governance, alerts, lineage, prune, and this machine's reaper
        wait_until(lambda: LoopLease.objects.exclude(holder="").count() == 6, timeout=60, what="every loop lease",
                   log_path=tmp_path / "serve.log")
        # the once-only passwords come last, in a box, after the cluster's start-up lines
        wait_until(lambda: "s3cret-pw" in (tmp_path / "serve.log").read_text(), timeout=30, what="the logins box",
                   log_path=tmp_path / "serve.log")
        text = (tmp_path / "serve.log").read_text()
        assert text.index("Demo logins") > text.rindex("loop started as"), text[-3000:]
        assert "| login: operator / s3cret-pw" in text and str(logins) in text
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to serve and every process of its group
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    children = subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert children == [], "a child of serve outlived it"
    assert not answers(f"http://127.0.0.1:{port}/accounts/login/")
    assert LoopLease.objects.exclude(holder="").count() == 0, "the loops released their leases"
    text = (tmp_path / "serve.log").read_text()
    # gunicorn's gevent workers printed "failed with SystemExit" and its traceback, each, at every Ctrl-C
    assert "Traceback" not in text and "SystemExit" not in text, text[text.find("Handling signal"):][:3000]
