"""The audit report's counts in process: the hourly counts (AuditCount) against the log's own GROUP BYs.

    .venv/bin/python bench/audit_counts.py postgres://postgres@127.0.0.1:5432/bench_scale_10000000 [--repeat 40]

On a database bench/scale.py generated (and migrated: `--reuse` runs migrate), times `audit_counts` (what the
page shows) and `audit_counts_raw` (the three GROUP BYs of the log it replaced) one after the other, `--repeat`
times each, for the whole 31 days and for a few filters, in UTC and in a zone whose local days begin inside a
UTC hour (Asia/Kolkata); checks both give the same answer; prints p50 and p95 in ms and the rows each reads.
Interleaved in one process, so the machine's load moves both alike. Nothing is written.
"""
from __future__ import annotations

import argparse
import sys
import time
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import pct, setup_django  # noqa: E402  after the path insert above


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="the database (DATABASE_URL form)")
    parser.add_argument("--repeat", type=int, default=40)
    args = parser.parse_args()
    setup_django(args.url, migrate=False)
    from django.utils import timezone

    from scheduler.audit_reads import audit_counts, audit_counts_raw, audit_filtered
    from scheduler.models import AuditCount, AuditEntry

    now = timezone.now()
    since = now - timedelta(days=31)
    print(f"log: {AuditEntry.objects.filter(at__gte=since).count():,} entries in 31 days;"
          f" counts: {AuditCount.objects.filter(hour__gte=since).count():,} rows in 31 days")
    cases = {"whole 31 days": {}, "action run.": {"action": "run."}, "actor operator": {"actor": "operator"}}
    print(f"{'case':<32} {'rollup p50':>11} {'p95':>8} {'raw p50':>9} {'p95':>8}")
    for zone in ("UTC", "Asia/Kolkata"):
        for label, filters in cases.items():
            times: dict[str, list[float]] = {"rollup": [], "raw": []}
            with timezone.override(ZoneInfo(zone)):
                for i in range(args.repeat + 2):
                    t0 = time.perf_counter()
                    new = audit_counts(filters, now=now)
                    t1 = time.perf_counter()
                    old = audit_counts_raw(audit_filtered(filters), now=now)
                    t2 = time.perf_counter()
                    if new != old:
                        raise SystemExit(f"{zone} {label}: the counts differ from the log's")
                    if i >= 2:  # two warm-ups
                        times["rollup"].append((t1 - t0) * 1000)
                        times["raw"].append((t2 - t1) * 1000)
            print(f"{zone + ', ' + label:<32} {pct(times['rollup'], 50):>11.1f} {pct(times['rollup'], 95):>8.1f}"
                  f" {pct(times['raw'], 50):>9.1f} {pct(times['raw'], 95):>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
