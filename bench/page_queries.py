"""Every query of a page with its time, slowest first; optionally each slow one's plan.

    .venv/bin/python bench/page_queries.py --url postgres://postgres@127.0.0.1:5432/bench_scale_1000000 / /metrics
    .venv/bin/python bench/page_queries.py --url sqlite:////tmp/etl-scale/scale-1000000.sqlite3 / --explain 5

A page is fetched `--repeat` times on the test client as the bench's superuser (`/metrics` with a bearer
token); each query's time is the median over the repeats (the first fetch is a warm-up and not counted), read
by an execution wrapper around the database cursor, with the time until the next query began (the fetch of
its rows, which SQLite does after `execute`, and the Python that used them). `--explain N` prints EXPLAIN
(ANALYZE, BUFFERS) on
PostgreSQL, EXPLAIN QUERY PLAN on SQLite, of the N slowest.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import setup_django  # noqa: E402

TOKEN = "bench-page-queries-token"


def capture(client, path: str) -> list[tuple[str, tuple, float, float]]:
    """(sql, params, ms in execute, ms until the next query began) of each query of one GET of `path`.

    The second time holds the rows' fetch and what Python did with them: SQLite steps through a query's rows
    as they are fetched, after `execute` has returned."""
    from django.db import connection

    seen: list[list] = []

    def wrapper(execute, sql, params, many, context):
        t0 = time.perf_counter()
        if seen:
            seen[-1][3] = (t0 - seen[-1][4]) * 1000
        try:
            return execute(sql, params, many, context)
        finally:
            seen.append([sql, params, (time.perf_counter() - t0) * 1000, 0.0, t0])

    headers = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"} if path.startswith("/metrics") else {}
    with connection.execute_wrapper(wrapper):
        response = client.get(path, **headers)
    end = time.perf_counter()
    if seen:
        seen[-1][3] = (end - seen[-1][4]) * 1000
    assert response.status_code == 200, (path, response.status_code)
    return [tuple(row[:4]) for row in seen]


def explain(sql: str, params) -> str:
    from django.db import connection

    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        else:
            cur.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(" | ".join(str(c) for c in row) for row in cur.fetchall())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--url", required=True, help="DATABASE_URL of a history made by bench/scale.py")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--explain", type=int, default=0, help="plans of the N slowest queries")
    parser.add_argument("--width", type=int, default=160, help="characters of SQL shown per query")
    args = parser.parse_args()
    setup_django(args.url, migrate=False, DEBUG="0")
    from django.contrib.auth.models import User
    from django.test import Client, override_settings

    from bench.history import ADMIN

    client = Client()
    client.force_login(User.objects.get(username=ADMIN))
    with override_settings(ETL_METRICS_TOKEN=TOKEN, ALLOWED_HOSTS=["*"]):
        for path in args.paths:
            capture(client, path)  # warm-up
            rounds = [capture(client, path) for _ in range(args.repeat)]
            n = len(rounds[0])
            rows = []
            for i, (sql, params, _, _) in enumerate(rounds[0]):
                times = [r[i][2] for r in rounds if len(r) == n]
                slots = [r[i][3] for r in rounds if len(r) == n]
                rows.append((statistics.median(times), statistics.median(slots), sql, params))
            total = statistics.median(sum(q[2] for q in r) for r in rounds)
            print(f"\n== {path}: {n} queries, {total:.1f} ms in execute (median of {args.repeat}); each query: ms in "
                  "execute, ms until the next query")
            for med, slot, sql, _ in sorted(rows, key=lambda r: -max(r[0], r[1])):
                print(f"{med:8.2f} {slot:8.2f}  {' '.join(sql.split())[:args.width]}")
            for med, _, sql, params in sorted(rows, key=lambda r: -max(r[0], r[1]))[:args.explain]:
                print(f"\n-- {med:.2f} ms: {' '.join(sql.split())}\n   params {params}\n{explain(sql, params)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
