"""Scenario 11: a command's output into the run log: lines per second, and the worker's peak RSS.

A command writes N lines of 60 bytes to stdout (`WRITER`, a Python
one-liner, block-buffered). Its run is executed by `execute_run` exactly as a
worker does, each size in a fresh child process of its own (so the child's
peak RSS, `VmHWM` in /proc/self/status, is that run's and nothing earlier):
the command's lines are read one at a time into the run log
(services/commands.py `_pump_lines`), kept up to the run log's cap
(`ETL_RUN_LOG_MAX_BYTES`, 256 KiB by default: about 4,300 of these lines)
and counted past it; the heartbeat pump stores what is pending every beat
and the worker the rest at the end.

* read rate: N / the wall time of `execute_run` (spawn to the end written and
  the log stored), at the default cap, N = 100,000 and 1,000,000. Past the
  cap a line is read and counted, not stored.
* stored rate: N = 100,000 with the cap raised so every line is kept (16 MiB).
* peak RSS of the process executing the run, for N = 1 (the baseline), the two
  sizes at the default cap, and the stored run. Target (issue 20): bounded,
  independent of the number of lines: 1,000,000 lines no more than 5 MB over
  100,000.
* for scale, the writer alone into a pipe that `communicate()` drains.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import Result, emit, median, scenario_args, scratch_database, setup_django  # noqa: E402

TITLE = "command output into the run log"
SIZES = {"lines": 100_000, "big_lines": 1_000_000}
LINE_BYTES = 60  # with its newline
# a block of 1,000 numbered lines written again and again: the writer runs far faster than any line reader,
# so what is measured is the reading side
WRITER = ("import sys\nn = int(sys.argv[1]); pad = 'x' * 50\n"
          "block = ''.join(f'{i:08d} {pad}\\n' for i in range(1000))\n"
          "for _ in range(n // 1000):\n    sys.stdout.write(block)\n"
          "sys.stdout.write(block[:(n % 1000) * 60])\n")
STORE_ALL_CAP = 16 * 1024 * 1024
GROWTH_TARGET_MB = 5.0
DROPPED = re.compile(r"log cap of \d+ bytes reached: (\d+) later line")


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _schedule(lines: int):
    from scheduler.models import Schedule
    from scheduler.services.definitions.schedules import schedule_save

    name = f"bench-lines-{lines}"
    return Schedule.objects.filter(name=name).first() or schedule_save(data={
        "name": name, "target_kind": "command", "target_id": "", "trigger_kind": "manual", "retry_max_attempts": 1,
        "command": {"argv": [sys.executable, "-c", WRITER, str(lines)]}}, actor="bench")


def measure(lines: int) -> dict:
    """One run of the writer through execute_run in this process: time, lines stored and counted, RSS."""
    from django.utils import timezone

    from scheduler.models import RunLogLine, RunStatus
    from scheduler.services.cluster.execution import execute_run
    from scheduler.services.runs.queue import run_enqueue, run_transition

    schedule = _schedule(lines)
    now = timezone.now()
    run = run_enqueue(schedule=schedule, trigger_kind="manual", trigger_key=f"bench:{uuid.uuid4().hex}", now=now)
    token = uuid.uuid4().hex
    assert run_transition(run, new=RunStatus.RUNNING, now=now, admitted_at=now, heartbeat_at=now, dispatch_token=token)
    hwm_before = _status_kb("VmHWM")
    t0 = time.perf_counter()
    outcome = execute_run(run.pk, token)
    seconds = time.perf_counter() - t0
    run.refresh_from_db()
    assert outcome == RunStatus.SUCCEEDED, f"run {run.pk}: {outcome} {run.reason}"
    stored = RunLogLine.objects.filter(run=run, source="stdout").count()
    notes = list(RunLogLine.objects.filter(run=run, source="scheduler").values_list("message", flat=True))
    dropped = next((int(m.group(1)) for note in notes if (m := DROPPED.search(note))), 0)
    return {
        "lines": lines, "seconds": seconds, "stored": stored, "dropped": dropped, "counted": stored + dropped,
        "lines_per_s": lines / seconds, "hwm_before_mb": hwm_before / 1024, "hwm_mb": _status_kb("VmHWM") / 1024,
        "rss_after_mb": _status_kb("VmRSS") / 1024,
        "run_seconds": (run.finished_at - run.started_at).total_seconds(),
        "cap_bytes": _cap(),
    }


def _cap() -> int:
    from django.conf import settings

    return settings.ETL_RUN_LOG_MAX_BYTES


def in_child(url: str, lines: int, *, cap: int | None = None) -> dict:
    """`measure` in a fresh process (its own peak RSS), against the migrated scratch database `url`."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    env = {**os.environ, "DATABASE_URL": url}
    if cap is not None:
        env["ETL_RUN_LOG_MAX_BYTES"] = str(cap)
    try:
        proc = subprocess.run([sys.executable, __file__, "--child", str(lines), "--out", out], env=env,
                              capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
        if proc.returncode != 0:
            raise RuntimeError(f"child for {lines} lines failed:\n{proc.stderr[-3000:]}")
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def writer_alone(lines: int) -> float:
    """Lines per second of the writer into a pipe that communicate() drains in big reads (no per-line work)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRITER, str(lines)], stdout=subprocess.PIPE, check=True)
    seconds = time.perf_counter() - t0
    assert proc.stdout.count(b"\n") == lines
    return lines / seconds


def run(url: str, lines: int = 100_000, big_lines: int = 1_000_000, db: str = "-") -> Result:
    result = Result(11, TITLE, db)
    baseline = in_child(url, 1)
    small = in_child(url, lines)
    big = in_child(url, big_lines)
    stored = in_child(url, lines, cap=STORE_ALL_CAP)
    raw = median([writer_alone(big_lines) for _ in range(3)])
    for m in (small, big):
        # the count past the cap also holds the scheduler's own notes that came after it ("command exited ...")
        assert m["lines"] <= m["counted"] <= m["lines"] + 3, f"{m['lines']} lines written, {m['counted']} counted"
    assert stored["stored"] == lines, f"{lines} lines written, {stored['stored']} stored under a 16 MiB cap"
    growth = big["hwm_mb"] - small["hwm_mb"]
    result.details = {"baseline": baseline, "small": small, "big": big, "stored_all": stored,
                      "writer_alone_lines_per_s": raw, "line_bytes": LINE_BYTES}
    cap_kib = small["cap_bytes"] // 1024
    for m in (small, big):
        n = f"{m['lines']:,}"
        result.add(f"{n} lines, cap {cap_kib} KiB: read into the run log (stored up to the cap, the rest counted)",
                   m["lines_per_s"], "lines/s")
        result.add(f"  lines stored (the rest counted, {m['dropped']:,})", m["stored"], "lines")
        result.add("  worker peak RSS (VmHWM)", m["hwm_mb"], "MB")
    result.add(f"peak RSS growth, {lines:,} -> {big_lines:,} lines", growth, "MB",
               f"<= {GROWTH_TARGET_MB:g} MB", growth <= GROWTH_TARGET_MB)
    result.add("peak RSS of a 1-line run (the baseline)", baseline["hwm_mb"], "MB")
    result.add(f"{lines:,} lines, cap {STORE_ALL_CAP // 1024 // 1024} MiB: every line stored", stored["lines_per_s"],
               "lines/s")
    result.add("  worker peak RSS (VmHWM)", stored["hwm_mb"], "MB")
    result.add(f"the writer alone into a pipe, {big_lines:,} lines (no per-line work), for scale", raw, "lines/s")
    return result


def main() -> None:
    if "--child" in sys.argv:
        lines, out = int(sys.argv[sys.argv.index("--child") + 1]), sys.argv[sys.argv.index("--out") + 1]
        setup_django(os.environ["DATABASE_URL"], migrate=False)
        Path(out).write_text(json.dumps(measure(lines)))
        return
    args = scenario_args(TITLE, SIZES).parse_args()
    lines = args.lines or (10_000 if args.quick else SIZES["lines"])
    big_lines = args.big_lines or (100_000 if args.quick else SIZES["big_lines"])
    with scratch_database(args.db) as url:
        setup_django(url)
        result = run(url, lines=lines, big_lines=big_lines, db=args.db)
    emit(result, args.out)


if __name__ == "__main__":
    main()
