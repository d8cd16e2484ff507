"""Scenario 7: dashboard pages with 1,000,000 runs in the ledger.

The runs are inserted by one INSERT ... SELECT over a generated series (a
recursive CTE on SQLite, generate_series on PostgreSQL): 100 schedules, 1 %
FAILED, a few SKIPPED and BLOCKED, the rest SUCCEEDED, plus a few live runs
and one workflow run with a report. Pages: the overview, the runs list
filtered by status and by schedule (50 rows a page, first page and the 50th
page through the keyset cursor), and a run detail. Timed on the Django test
client (one thread) and on a real gunicorn server under concurrent load from
a few client threads; query counts are taken at page sizes 10, 50 and 200.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    ROOT,
    Result,
    child_env,
    count_queries,
    emit,
    maybe_profile,
    pct,
    scenario_args,
    scratch_database,
    setup_django,
)

TITLE = "dashboard pages"
SIZES = {"runs": 1_000_000, "requests": 40, "threads": 4}
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc)
COLUMNS = ("schedule_id, trigger_key, trigger_kind, params, priority, workload_class_id, status, attempt, max_attempts,"
           " window_low, window_high, rows_loaded, watermark_after, queued_at, admitted_at, started_at, finished_at,"
           " heartbeat_at, worker_id, dispatch_token, error, reason, triggered_by")


def seed(n: int) -> dict:
    from django.db import connection

    from scheduler.models import Run, RunStatus, Schedule, Team, WorkloadClass

    wc = WorkloadClass.objects.get(name="standard")
    owner = Team.default_team_id()  # bulk_create skips Schedule.save, which fills it in
    Schedule.objects.bulk_create([Schedule(name=f"dash-{i:03d}", target_id="demo.noop", workload_class=wc,
                                           owner_id=owner)
                                  for i in range(100)])
    first = Schedule.objects.order_by("id").values_list("id", flat=True).first()
    status = ("CASE WHEN x % 100 = 0 THEN 'FAILED' WHEN x % 100 = 1 THEN 'SKIPPED' WHEN x % 100 = 2 THEN 'BLOCKED'"
              " ELSE 'SUCCEEDED' END")
    reason = "CASE WHEN x % 100 = 0 THEN 'RuntimeError: source unavailable' ELSE '' END"
    kind = "CASE WHEN x % 2 = 0 THEN 'cron' ELSE 'manual' END"
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            ts = "TIMESTAMPTZ '2024-01-01 00:00:00+00' + x * INTERVAL '30 seconds'"
            cur.execute(
                f"INSERT INTO scheduler_run ({COLUMNS}) SELECT {first} + x % 100, 'b:' || x, {kind}, '{{}}', 5, {wc.pk},"
                f" {status}, 1, 1, '', '', 0, '', {ts}, {ts}, {ts} + INTERVAL '1 second', {ts} + INTERVAL '3 seconds',"
                f" {ts} + INTERVAL '3 seconds', 'bench@host:1', 'tok', '', {reason}, 'bench'"
                f" FROM generate_series(1, ".replace("%", "%%")
                + "%s) AS x",
                [n],
            )
            cur.execute("ANALYZE scheduler_run")
        else:
            def ts(offset: int) -> str:
                return f"strftime('%Y-%m-%d %H:%M:%f', '2024-01-01', '+' || (x * 30 + {offset}) || ' seconds')"
            cur.execute(
                f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %s)"
                f" INSERT INTO scheduler_run ({COLUMNS}) SELECT {first} + x % 100, 'b:' || x, {kind}, '{{}}', 5, {wc.pk},"
                f" {status}, 1, 1, '', '', 0, '', {ts(0)}, {ts(0)}, {ts(1)}, {ts(3)}, {ts(3)}, 'bench@host:1', 'tok', '',"
                f" {reason}, 'bench' FROM c",
                [n],
            )
            cur.execute("ANALYZE")
    seeded = time.perf_counter() - t0
    schedule = Schedule.objects.get(name="dash-007")
    for i, st in enumerate([RunStatus.RUNNING] * 3 + [RunStatus.QUEUED] * 5):
        Run.objects.create(schedule=schedule, trigger_key=f"live:{i}", trigger_kind="manual", workload_class=wc,
                           status=st, queued_at=NOW, started_at=NOW if st == RunStatus.RUNNING else None,
                           heartbeat_at=NOW if st == RunStatus.RUNNING else None)
    report = {"records": [{"task_id": f"t{i}", "outcome": "SUCCESS", "started_at": NOW.isoformat(),
                           "finished_at": NOW.isoformat(), "rows": 10, "watermark": None, "reason": ""}
                          for i in range(20)], "skipped": [], "blocked": [], "ok": True}
    detail = Run.objects.create(schedule=schedule, trigger_key="detail", trigger_kind="manual", workload_class=wc,
                                status=RunStatus.SUCCEEDED, queued_at=NOW, started_at=NOW, finished_at=NOW,
                                rows_loaded=200, report=report)
    failed = list(Run.objects.filter(status=RunStatus.FAILED).order_by("-id").values_list("id", flat=True)[:2451])
    by_schedule = list(
        Run.objects.filter(schedule__name="dash-042").order_by("-id").values_list("id", flat=True)[:2451]
    )
    return {"seed_s": seeded, "detail_id": detail.pk, "failed_page50_before": failed[-1],
            "schedule_page50_before": by_schedule[-1]}


def pages(info: dict) -> dict[str, str]:
    return {
        "overview": "/",
        "runs: status=FAILED": "/runs/?status=FAILED",
        "runs: status=FAILED, page 50": f"/runs/?status=FAILED&before={info['failed_page50_before']}",
        "runs: schedule, page 50": f"/runs/?schedule=dash-042&before={info['schedule_page50_before']}",
        "run detail (workflow report)": f"/runs/{info['detail_id']}/",
    }


def test_client(urls: dict[str, str], requests: int, profile: bool) -> dict:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.create_superuser("bench", "bench@example.com", "bench-pw-123!"))
    out = {}
    for label, url in urls.items():
        for _ in range(3):
            assert client.get(url).status_code == 200, url
        times = []
        for _ in range(requests):
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
            assert response.status_code == 200
        if profile:
            name = "".join(c if c.isalnum() else "-" for c in label).strip("-")
            with maybe_profile(f"s7-{name}", True):  # extra, untimed requests
                for _ in range(10):
                    client.get(url)
        queries, _, _ = count_queries(lambda: client.get(url))
        out[label] = {"p50": pct(times, 50), "p95": pct(times, 95), "queries": queries}
    sizes = {}
    for size in (10, 50, 200):
        with mock.patch("scheduler.views.pages.PAGE_SIZE", size):
            q, _, response = count_queries(lambda: client.get(urls["runs: status=FAILED"]))
            assert response.status_code == 200
            sizes[size] = q
    out["queries_by_page_size"] = sizes
    out["session"] = client.cookies["sessionid"].value
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def real_server(url_db: str, urls: dict[str, str], session: str, requests: int, threads: int) -> dict:
    port = _free_port()
    env = child_env(url_db, DEBUG="0")
    cmd = [sys.executable, "-m", "gunicorn", "etlsite.wsgi:application", "--bind", f"127.0.0.1:{port}",
           "--workers", "2", "--threads", "2", "--worker-class", "gthread", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"

    def get(path: str) -> float:
        req = urllib.request.Request(base + path, headers={"Cookie": f"sessionid={session}"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
            assert resp.status == 200, path
        return (time.perf_counter() - t0) * 1000

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get("/")
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("gunicorn did not come up") from None
                time.sleep(0.3)
        out = {}
        for label, path in urls.items():
            for _ in range(4):
                get(path)
            times: list[float] = []
            lock = threading.Lock()

            def worker() -> None:
                for _ in range(requests // threads or 1):
                    ms = get(path)
                    with lock:
                        times.append(ms)

            pool = [threading.Thread(target=worker) for _ in range(threads)]
            t0 = time.perf_counter()
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            wall = time.perf_counter() - t0
            out[label] = {"p50": pct(times, 50), "p95": pct(times, 95), "rps": len(times) / wall}
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def run(url_db: str, runs: int = 1_000_000, requests: int = 40, threads: int = 4, profile: bool = False,
        db: str = "-", server: bool = True) -> Result:
    result = Result(7, TITLE, db)
    info = seed(runs)
    urls = pages(info)
    client = test_client(urls, requests, profile)
    served = real_server(url_db, urls, client.pop("session"), requests, threads) if server else {}
    result.details = {"runs": runs, **info, "test_client": client, "server": served}
    for label in urls:
        p95 = client[label]["p95"]
        result.add(f"{label}: test client p95 ({client[label]['queries']} queries)", p95, "ms", "<= 100 ms",
                   p95 <= 100)
        if served:
            sp95 = served[label]["p95"]
            result.add(f"{label}: gunicorn, {threads} client threads, p95", sp95, "ms", "<= 100 ms", sp95 <= 100)
    sizes = client["queries_by_page_size"]
    result.add("runs list queries at page size 10 / 50 / 200", None,
               " / ".join(str(sizes[s]) for s in (10, 50, 200)), "constant", len(set(sizes.values())) == 1)
    result.add(f"seed {runs:,} runs (INSERT ... SELECT)", info["seed_s"], "s", "", None)
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    runs = args.runs or (100_000 if args.quick else SIZES["runs"])
    requests = args.requests or (12 if args.quick else SIZES["requests"])
    threads = args.threads or SIZES["threads"]
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(url, runs=runs, requests=requests, threads=threads, profile=args.profile, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
