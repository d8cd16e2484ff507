"""Scenario 9: cancel to stopped, on a real cluster.

A real `manage.py qcluster` (shipped settings: 2 workers, dispatch loop every
0.1 s; the heartbeat at its default ETL_HEARTBEAT_SECONDS = 5, the grace
ETL_CANCEL_GRACE_SECONDS = GRACE) runs one run at a time; each is cancelled
with `run_cancel` a random time (0 to one heartbeat interval) after its code
began, so the cancel lands anywhere in the heartbeat pump's cycle. The
figure is the time from `run_cancel`'s commit to the moment the run's row is
final (CANCELLED): its `finished_at`, written by the worker, minus the time
`run_cancel` returned in this process (same machine, same clock).

* cooperative: a Python pipeline (`bench.cooperative`, bench/probe.py) that
  loops on `ctx.check_cancelled()` with a 50 ms sleep. Target (issue 20):
  p95 <= heartbeat interval + 1 s.
* forced: a command that ignores SIGTERM (`FORCED`); its group gets SIGTERM
  when the worker reads the request, SIGKILL after the grace. Each cancel
  waits until the command's process exists with SIGTERM ignored (its
  /proc/<pid>/status SigIgn), so the request never beats the handler.
  Target: p95 <= grace + 2 s.
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import (  # noqa: E402
    REDIS_URL,
    Result,
    emit,
    flush_redis,
    pct,
    scenario_args,
    scratch_database,
    setup_django,
    start_cluster,
    stop_cluster,
    wait_until,
)

TITLE = "cancel to stopped, real cluster"
SIZES = {"cancels": 20}
HEARTBEAT = 5.0  # ETL_HEARTBEAT_SECONDS's default, set explicitly so an outer environment cannot change it
GRACE = 3.0
FORCED = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
SIGTERM_BIT = 1 << 14  # signal 15 in /proc/<pid>/status SigIgn


def _ignoring_sigterm(marker: str) -> int | None:
    """The pid of the forced command (its argv holds `marker`) once it ignores SIGTERM, else None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker.encode() not in (entry / "cmdline").read_bytes():
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        ignored = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigIgn:")), 0)
        if ignored & SIGTERM_BIT:
            return int(entry.name)
    return None


def _cancel_one(schedule, *, marker: str | None, log: Path) -> dict:
    from django.utils import timezone

    from scheduler.models import Run, RunStatus
    from scheduler.services.runs.end import run_cancel
    from scheduler.services.runs.queue import run_trigger_manual

    run = run_trigger_manual(schedule=schedule, actor="bench")
    wait_until(lambda: Run.objects.filter(pk=run.pk, started_at__isnull=False).exists(), timeout=60,
               what=f"run {run.pk} to begin", poll=0.01, log_path=log)
    if marker:
        wait_until(lambda: _ignoring_sigterm(marker), timeout=30, what=f"the command of run {run.pk}", poll=0.01,
                   log_path=log)
    time.sleep(random.uniform(0.0, HEARTBEAT))
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING, f"run {run.pk} is {run.status} before the cancel: {run.reason}"
    assert run_cancel(run=run, actor="bench", reason="bench: cancel to stopped")
    committed = timezone.now()
    wait_until(lambda: Run.objects.filter(pk=run.pk, finished_at__isnull=False).exists(),
               timeout=HEARTBEAT + GRACE + 60, what=f"run {run.pk} to stop", poll=0.01, log_path=log)
    seen = timezone.now()
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED, f"run {run.pk} ended {run.status}: {run.reason}"
    return {"run": run.pk, "s": (run.finished_at - committed).total_seconds(),
            "seen_s": (seen - committed).total_seconds(), "exit_code": run.exit_code}


def run(url: str, cancels: int = 20, db: str = "-", extra: dict | None = None) -> Result:
    from scheduler.models import LoopLease
    from scheduler.services.definitions.schedules import schedule_save

    extra = extra or {}
    result = Result(9, TITLE, db)
    if extra.get("REDIS_URL"):
        flush_redis(extra["REDIS_URL"])
    marker = f"etl-bench-s9-{uuid.uuid4().hex[:8]}"
    cooperative = schedule_save(data={"name": "bench-cooperative", "target_id": "bench.cooperative",
                                      "trigger_kind": "manual", "retry_max_attempts": 1}, actor="bench")
    forced = schedule_save(data={"name": "bench-ignores-sigterm", "target_kind": "command", "target_id": "",
                                 "command": {"argv": [sys.executable, "-c", FORCED, marker]},
                                 "trigger_kind": "manual", "retry_max_attempts": 1}, actor="bench")
    settings = {"ETL_HEARTBEAT_SECONDS": f"{HEARTBEAT:g}", "ETL_CANCEL_GRACE_SECONDS": f"{GRACE:g}"}
    out: dict[str, list[dict]] = {"cooperative": [], "forced": []}
    with tempfile.TemporaryDirectory(prefix="etl-bench-s9-") as tmp:
        log = Path(tmp) / "cluster.log"
        proc = start_cluster(url, log_path=log, **settings, **extra)
        try:
            wait_until(lambda: LoopLease.objects.filter(name="dispatch").exclude(holder="").exists(), timeout=60,
                       what="the dispatch loop", log_path=log)
            time.sleep(1.0)  # workers forked and idle
            for _ in range(cancels):
                out["cooperative"].append(_cancel_one(cooperative, marker=None, log=log))
            for _ in range(cancels):
                out["forced"].append(_cancel_one(forced, marker=marker, log=log))
        finally:
            stop_cluster(proc)
    result.details = {"settings": {**settings, "cooperative_sleep_s": 0.05}, **out}
    targets = {"cooperative": HEARTBEAT + 1, "forced": GRACE + 2}
    labels = {"cooperative": "cooperative Python pipeline (check_cancelled, 50 ms steps)",
              "forced": "command ignoring SIGTERM (SIGKILL after the grace)"}
    for kind in ("cooperative", "forced"):
        values = [m["s"] for m in out[kind]]
        result.add(f"{labels[kind]}: cancel -> CANCELLED, p50 ({len(values)} cancels; heartbeat {HEARTBEAT:g} s, "
                   f"grace {GRACE:g} s)", pct(values, 50), "s")
        p95 = pct(values, 95)
        result.add("  p95", p95, "s", f"<= {targets[kind]:g} s", p95 <= targets[kind])
        result.add("  min", min(values), "s")
    return result


def main() -> None:
    args = scenario_args(TITLE, SIZES).parse_args()
    cancels = args.cancels or (4 if args.quick else SIZES["cancels"])
    extra = {"REDIS_URL": REDIS_URL} if args.db == "postgres" else {}
    with scratch_database(args.db) as url:
        setup_django(url, **extra)
        result = run(url, cancels=cancels, db=args.db, extra=extra)
    emit(result, args.out)


if __name__ == "__main__":
    main()
