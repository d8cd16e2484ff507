"""Start real `manage.py qcluster` processes against the test database."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Callable

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def child_database_url() -> str:
    """The URL of the database pytest-django created, for child processes."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        name = s["NAME"]
        if name == ":memory:" or "mode=memory" in str(name):
            raise RuntimeError("cluster tests need a file-backed SQLite test database")
        return f"sqlite:///{name}"
    if connection.vendor == "postgresql":
        user = s.get("USER") or "postgres"
        host = s.get("HOST") or "127.0.0.1"
        port = s.get("PORT") or 5432
        password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
        return f"postgres://{user}{password}@{host}:{port}/{s['NAME']}"
    raise RuntimeError(f"unsupported vendor {connection.vendor}")


def start_cluster(name: str, *, log_path: Path, extra_env: dict | None = None,
                  args: tuple[str, ...] = (), python: str = sys.executable) -> subprocess.Popen:
    """`manage.py qcluster --name NAME` against the test database; `python`: another environment's interpreter
    (a venv with a team's package installed, tests/integration/test_your_code.py)."""
    env = {
        **os.environ,
        "DATABASE_URL": child_database_url(),
        "ETL_DISPATCH_INTERVAL": "0.05",
        "ETL_GOVERNANCE_INTERVAL": "1",
        "ETL_HEARTBEAT_SECONDS": "0.5",
        "ETL_LEASE_SECONDS": "3",
        "ETL_STUCK_SECONDS": "5",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    log = open(log_path, "ab")  # noqa: SIM115  closed with the process
    # its own session, so a test can kill the whole process group (sentinel, workers)
    return subprocess.Popen(
        [python, "manage.py", "qcluster", "--name", name, *args], cwd=ROOT, env=env, stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )


def stop_cluster(proc: subprocess.Popen, *, timeout: float = 60.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        raise


def kill_cluster(proc: subprocess.Popen) -> None:
    """SIGKILL the whole process group: the cluster dies without cleaning up."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, log_path: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    tail = log_path.read_text()[-3000:] if log_path and log_path.exists() else ""
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n--- cluster log ---\n{tail}")


def answers(url: str, *, timeout: float = 2.0) -> bool:
    """True when `url` answers 200 (a web server that is up)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except OSError:
        return False
