"""The pages timed in one measuring process of bench/scale.py: their URLs in a generated history, the web server
started as `manage.py serve --no-cluster` starts it, and each page's query count, p50, p95 and size."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Iterator

from bench.common import ROOT, child_env, count_queries, pct
from bench.scale_ticks import MIN_REQUESTS

METRICS_TOKEN = "bench-scale-metrics-token"


PAGE_LABELS = ("overview", "runs list, first page", "runs list, page 101", "schedule page", "timeline (default 6 h)",
               "timeline (48 h)", "audit report", "/metrics")


def page_urls() -> dict[str, str]:
    from scheduler.models import Run, Schedule

    from bench.history import CRONS

    newest = Run.objects.order_by("-id").values_list("id", flat=True)
    # page 101, 5,000 runs back (or the oldest run in a smaller history)
    deep = next(iter(newest[50 * 100 - 1:50 * 100]), None) or newest.reverse().first()
    schedule = Schedule.objects.filter(name__startswith="hist-").order_by("id")[CRONS.start]
    return {
        "overview": "/",
        "runs list, first page": "/runs/",
        "runs list, page 101": f"/runs/?before={deep}",
        "schedule page": f"/schedules/{schedule.pk}/",
        "timeline (default 6 h)": "/timeline/",
        "timeline (48 h)": "/timeline/?range=48h",
        "audit report": "/audit/",
        "/metrics": "/metrics",
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(url_db: str) -> Iterator[str]:
    """`manage.py serve --no-cluster` (its gunicorn command and the product's settings, DEBUG off) on a free port."""
    port = _free_port()
    static = tempfile.mkdtemp(prefix="etl-scale-static-")
    env = child_env(url_db, DEBUG="0", ETL_METRICS_TOKEN=METRICS_TOKEN, STATIC_ROOT=static)
    proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--no-cluster", "--addr", f"127.0.0.1:{port}"],
                            cwd=ROOT, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(base + "/accounts/login/", timeout=5):
                    break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the server did not come up") from None
                time.sleep(0.3)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        shutil.rmtree(static, ignore_errors=True)


def chosen_pages(urls: dict[str, str], words: str | None) -> dict[str, str]:
    """The pages whose label holds one of the comma-separated `words` (all of them without any)."""
    if not words:
        return urls
    wanted = [w.strip() for w in words.split(",") if w.strip()]
    chosen = {label: url for label, url in urls.items() if any(w in label for w in wanted)}
    if not chosen:
        raise SystemExit(f"--pages {words!r}: no page's label holds it (pages: {', '.join(urls)})")
    return chosen


def time_pages(url_db: str, requests: int, budget_s: float, words: str | None = None) -> dict:
    from django.contrib.auth.models import User
    from django.test import Client

    from bench.history import ADMIN

    client = Client()
    client.force_login(User.objects.get(username=ADMIN))
    session = client.cookies["sessionid"].value
    urls = chosen_pages(page_urls(), words)
    out: dict = {}
    for label, path in urls.items():
        auth = {"HTTP_AUTHORIZATION": f"Bearer {METRICS_TOKEN}"} if path == "/metrics" else {}
        with _metrics_token():
            queries, _, response = count_queries(lambda: client.get(path, **auth))
        assert response.status_code == 200, (path, response.status_code)
        out[label] = {"queries": queries}
    with served(url_db) as base:
        for label, path in urls.items():
            headers = {"Cookie": f"sessionid={session}"}
            if path == "/metrics":
                headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
            times, size, budget = [], 0, time.monotonic() + budget_s
            for i in range(requests + 3):  # three warm-ups
                if i >= 3 + MIN_REQUESTS and time.monotonic() > budget:
                    break  # a slow page at a large size: at least MIN_REQUESTS, then what the budget allows
                req = urllib.request.Request(base + path, headers=headers)
                t0 = time.perf_counter()
                with urllib.request.urlopen(req, timeout=120) as resp:
                    body = resp.read()
                    assert resp.status == 200 and resp.url == base + path, (path, resp.status, resp.url)
                if i >= 3:
                    times.append((time.perf_counter() - t0) * 1000)
                size = len(body)
            out[label].update({"p50": pct(times, 50), "p95": pct(times, 95), "kb": size / 1024, "n": len(times)})
    return out


@contextlib.contextmanager
def _metrics_token() -> Iterator[None]:
    from django.test import override_settings

    with override_settings(ETL_METRICS_TOKEN=METRICS_TOKEN):
        yield
