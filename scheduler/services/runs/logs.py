"""Per-run logs: what a run printed while a worker executed it, capped, stored, read by the run page.

The cap is both bytes (ETL_RUN_LOG_MAX_BYTES) and lines (ETL_RUN_LOG_MAX_LINES): each line is a row, so an
empty line costs what any other does.

A `RunLogCapture` is a logging handler on the root logger for the time one
run executes. It keeps only records of the worker thread that runs it (the
heartbeat pump and anything else in the process log elsewhere), adds the
scheduler's own notes (started, attempt, window, outcome), and stores the
lines in batches: the heartbeat pump saves what is pending every beat, so the
page can follow a RUNNING run, and the worker saves the rest when the run
ends. Saving never happens inside `emit`: a pipeline may be in the middle of
its own transaction when it logs.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from datetime import datetime
from datetime import timezone as dt_timezone
from typing import Any, Callable, Iterator, NamedTuple

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from scheduler.core.masking import masker
from scheduler.models import Run, RunLogLine, RunStatus

SCHEDULER = "scheduler"
ATTEMPT_SEQ_SPAN = 1 << 20  # lines a run's attempt may number (the line cap keeps far fewer)
MAX_LINES = 10_000  # ETL_RUN_LOG_MAX_LINES' default
log = logging.getLogger(__name__)

_active: dict[int, "RunLogCapture"] = {}
_active_guard = threading.Lock()


class RunLogCapture(logging.Handler):
    """Collects one run's log lines up to a byte cap; `save()` writes what is pending."""

    def __init__(self, run_id: int, *, max_bytes: int, max_line: int, level: int,
                 clock: Callable[[], datetime] = timezone.now, attempt: int = 1,
                 max_lines: int = MAX_LINES) -> None:
        super().__init__(level)
        self.run_id = run_id
        self.thread = threading.get_ident()
        self.max_bytes = max_bytes
        # every line is a row, an empty one too: bytes alone let 300,000 empty lines through (issue 33)
        self.max_lines = min(max_lines, ATTEMPT_SEQ_SPAN - 100)
        self.max_line = max_line
        self.clock = clock
        self.setFormatter(logging.Formatter("%(message)s"))
        self._mutex = threading.Lock()  # not Handler.lock: emit holds that one
        self._pending: list[Line] = []
        # each attempt numbers its lines in a range of its own: a lost or fenced attempt's late lines and the
        # next attempt's never take each other's (run, seq), and the log reads attempt after attempt
        self._seq = (max(1, attempt) - 1) * ATTEMPT_SEQ_SPAN
        self._bytes = 0
        self._lines = 0
        self._capped_by = ""  # "bytes" or "lines": the cap the first dropped line met
        self._closed = False  # the closing notes are written (close_notes)
        self.dropped = 0
        # the workflow node running now (set by the executor's node hook): its lines are filed under it
        self.node = ""

    # -- collecting --------------------------------------------------------
    def filter(self, record: logging.LogRecord) -> bool:
        # what this module says about storing a log is not a line of that log
        return record.thread == self.thread and record.name != __name__ and super().filter(record)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)  # the traceback too, when the record carries one
        except Exception:
            self.handleError(record)
            return
        at = datetime.fromtimestamp(record.created, tz=dt_timezone.utc)
        self.add(text, level=record.levelname, source=record.name, at=at)

    def note(self, message: str, *, level: str = "INFO", force: bool = False, node: str | None = None) -> None:
        """A line of the scheduler's own about this run (`force`: kept even past the cap; `node`: filed under it)."""
        self.add(message, level=level, source=SCHEDULER, at=self.clock(), force=force, node=node)

    def add(self, message: str, *, level: str, source: str, at: datetime, force: bool = False,
            node: str | None = None) -> None:
        if len(message) > self.max_line:
            # masked before the cut (a mask is never longer than what it replaces): a secret across the cut would
            # leave its first characters, which no mask matches; lines within the cap are masked as they are written
            message = masker.mask(message)
            if len(message) > self.max_line:
                message = message[: self.max_line] + f" … [{len(message) - self.max_line} characters cut]"
        size = len(message.encode("utf-8", "replace"))
        with self._mutex:
            if not force and (self._bytes + size > self.max_bytes or self._lines >= self.max_lines):
                self._capped_by = self._capped_by or ("lines" if self._lines >= self.max_lines else "bytes")
                self.dropped += 1
                return
            self._bytes += size
            self._lines += 1
            self._seq += 1
            self._pending.append(Line(
                self.run_id, self._seq, at, level[:8], source[:100],
                message.replace("\x00", "\\x00"),  # PostgreSQL text cannot hold NUL
                (self.node if node is None else node)[:200],
            ))

    # -- storing -----------------------------------------------------------
    def save(self) -> int:
        """Write the pending lines; on a database error keep them for the next save."""
        batch = self.take()
        if not batch:
            return 0
        try:
            insert_lines(batch)
        except Exception:
            with self._mutex:
                self._pending = batch + self._pending
            raise
        return len(batch)

    def finish(self) -> None:
        """The closing note (outcome, rows, and how much the cap dropped), then the last save."""
        if not self._closed:
            self.close_notes(Run.objects.filter(pk=self.run_id).values(*OUTCOME_FIELDS).first())
        self.save()

    def finish_from(self, run: Run) -> None:
        """`finish` from the run as its worker has just written its end (in memory: no read), in the transaction
        of that end; a failed save keeps the lines for the save when the capture ends."""
        self.close_notes({name: getattr(run, name) for name in OUTCOME_FIELDS})
        try:
            with transaction.atomic():  # a savepoint: the end is written whatever becomes of its log
                self.save()
        except Exception:
            log.warning("could not store the log of run %s with its end; kept for later", self.run_id, exc_info=True)

    def close_notes(self, row: dict | None) -> None:
        """The closing notes, from the run's final `row` (None: the run is gone)."""
        self._closed = True
        # the closing lines go in whatever the cap says: they are what a reader needs most
        if row is not None:
            self.note(_outcome_text(row), level="ERROR" if row["status"] == RunStatus.FAILED else "INFO", force=True,
                      node="")
        if self.dropped:
            cap = f"{self.max_lines} lines" if self._capped_by == "lines" else f"{self.max_bytes} bytes"
            self.note(f"log cap of {cap} reached: {self.dropped} later line(s) not kept",
                      level="WARNING", force=True, node="")

    def take(self) -> list[Line]:
        with self._mutex:
            batch, self._pending = self._pending, []
        return batch


OUTCOME_FIELDS = ("status", "rows_loaded", "reason", "watermark_after", "started_at", "finished_at")


def captures_store(captures: list[RunLogCapture], *, ended: dict[int, Run] | None = None) -> int:
    """A batch's finished runs: their closing notes and every pending line in one insert.

    `ended`: runs whose end their worker has just written, as written (in memory: not read again, as `finish_from`);
    the others' outcome is read."""
    if not captures:
        return 0
    ended = ended or {}
    rows = {pk: {name: getattr(run, name) for name in OUTCOME_FIELDS} for pk, run in ended.items()}
    unread = [c.run_id for c in captures if c.run_id not in rows]
    if unread:
        rows.update({r["id"]: r for r in Run.objects.filter(pk__in=unread).values("id", *OUTCOME_FIELDS)})
    lines: list[Line] = []
    for capture in captures:
        capture.close_notes(rows.get(capture.run_id))
        lines.extend(capture.take())
    return insert_lines(lines)


class Line(NamedTuple):
    """A line of a run's log on its way to the database (a model instance cost more than the rest of its write)."""

    run_id: int
    seq: int
    at: datetime
    level: str
    source: str
    message: str
    node: str


def insert_lines(lines: list[Line]) -> int:
    """`lines` in one statement (SQLite: one per INSERT_ROWS lines); a line stored already is skipped. Each message is
    masked as the model's field masks it (a secret the worker knows never reaches the table), here, the one place a
    run's log lines are written from a worker."""
    if not lines:
        return 0
    # One plain multi-row INSERT: bulk_create spent ~60 us of Python per line, more than the rest of a
    # no-op run's end. ON CONFLICT DO NOTHING is bulk_create's ignore_conflicts (PostgreSQL and SQLite).
    adapt = connection.ops.adapt_datetimefield_value
    rows = [line._replace(at=adapt(line.at), message=_MESSAGE.get_prep_value(line.message)) for line in lines]
    if connection.vendor == "postgresql":
        # seven arrays, whatever the number of lines: a statement of more than 50 parameters is parsed anew on each
        # call by psycopg (no cache), 2 ms for a batch's 64 lines, a tenth of a no-op run's time (issue 35)
        with connection.cursor() as cursor:
            cursor.execute(_INSERT_ARRAYS, [list(column) for column in zip(*rows)])
        return len(rows)
    for start in range(0, len(rows), INSERT_ROWS):
        chunk = rows[start:start + INSERT_ROWS]
        values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(chunk))
        params = [x for row in chunk for x in row]
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {RunLogLine._meta.db_table} (run_id, seq, at, level, source, message, node) "
                           f"VALUES {values} ON CONFLICT DO NOTHING", params)
    return len(lines)


INSERT_ROWS = 140  # 7 parameters a row: under SQLite's 999-parameter floor
_MESSAGE = RunLogLine._meta.get_field("message")  # a MaskedTextField
_INSERT_ARRAYS = (f"INSERT INTO {RunLogLine._meta.db_table} (run_id, seq, at, level, source, message, node) "
                  "SELECT * FROM unnest(%s::bigint[], %s::integer[], %s::timestamptz[], %s::varchar[], %s::varchar[], "
                  "%s::text[], %s::varchar[]) ON CONFLICT DO NOTHING")


def _outcome_text(row: dict) -> str:
    parts = [f"finished {row['status']}"]
    if row["started_at"] and row["finished_at"]:
        parts.append(f"after {(row['finished_at'] - row['started_at']).total_seconds():.1f} s")
    if row["rows_loaded"] is not None:
        parts.append(f"{row['rows_loaded']} rows")
    if row["watermark_after"]:
        parts.append(f"watermark now {row['watermark_after']}")
    text = ", ".join(parts)
    if row["status"] == RunStatus.RUNNING:
        text = "the worker stopped before the run ended"
    if row["reason"]:
        text += f": {row['reason']}"
    return text


def run_log_append(*, run_id: int, message: str, level: str = "INFO", at: datetime) -> None:
    """A line of the scheduler's own after the run's last one, for a run no worker executes now (a cancel of a
    queued run): after every attempt's range, so it reads last."""
    last = RunLogLine.objects.filter(run_id=run_id).order_by("-seq").values_list("seq", flat=True).first() or 0
    RunLogLine.objects.bulk_create([RunLogLine(run_id=run_id, seq=last + 1, at=at, level=level, source=SCHEDULER,
                                               message=message.replace("\x00", "\\x00"))], ignore_conflicts=True)


def save_pending() -> None:
    """Save every active capture's pending lines (the heartbeat pump calls this each beat)."""
    with _active_guard:
        captures = list(_active.values())
    for capture in captures:
        try:
            capture.save()
        except Exception:  # the worker saves again at the end; a blip here loses nothing
            log.debug("saving log lines of run %s failed; kept for later", capture.run_id, exc_info=True)


@contextmanager
def root_level_for_runs() -> Iterator[None]:
    """The root logger at ETL_RUN_LOG_LEVEL for the block, as `run_log_capture` sets it, and back after: a batch
    holds it across its runs, as setting a logger's level clears every logger's cache (0.05 ms, twice a run)."""
    level = logging.getLevelName(settings.ETL_RUN_LOG_LEVEL)
    root = logging.getLogger()
    old_level = root.level
    if old_level > level:
        root.setLevel(level)
    try:
        yield
    finally:
        if root.level == level and old_level > level:
            root.setLevel(old_level)


@contextmanager
def run_log_capture(run: Run, *, clock: Callable[[], datetime] = timezone.now,
                    store: bool = True) -> Iterator[RunLogCapture]:
    """Capture the worker thread's logging into `run`'s log for the duration of the block.

    `store=False` (a batch): the lines stay pending after the block, for `captures_store` once the run's end is written.
    """
    level = logging.getLevelName(settings.ETL_RUN_LOG_LEVEL)
    capture = RunLogCapture(
        run.pk, max_bytes=settings.ETL_RUN_LOG_MAX_BYTES, max_line=settings.ETL_RUN_LOG_MAX_LINE,
        max_lines=settings.ETL_RUN_LOG_MAX_LINES, level=level, clock=clock, attempt=run.attempt,
    )
    root = logging.getLogger()
    root.addHandler(capture)
    with _active_guard:
        _active[run.pk] = capture
    try:
        with root_level_for_runs():  # the root's WARNING default would drop a pipeline's INFO lines
            yield capture
    except BaseException:
        capture.note("the run stopped on an unexpected error", level="ERROR", force=True)
        raise
    finally:
        with _active_guard:
            _active.pop(run.pk, None)
        root.removeHandler(capture)
        try:
            if store:
                capture.finish()
        except Exception:
            log.warning("could not store the log of run %s", run.pk, exc_info=True)


def run_start_notes(capture: RunLogCapture, run: Run, *, now: datetime) -> None:
    """The scheduler's own opening lines: where, which attempt, how long it queued."""
    text = f"started on {run.worker_id or 'a worker'}, attempt {run.attempt} of {run.max_attempts}"
    if run.admitted_at:
        text += f"; admitted {(run.admitted_at - run.queued_at).total_seconds():.1f} s after it was queued"
    capture.note(text)
    if run.code_version:
        capture.note(f"code {run.code_version}")
    if run.rerun_of_id:
        capture.note(f"re-run of run {run.rerun_of_id}" + ("" if run.propagate else " (downstream not started)"))
    if run.attempt > 1 and run.reason:
        capture.note(f"previous attempt: {run.reason}", level="WARNING")


def node_logger(capture: RunLogCapture) -> Callable[[str, str, Any], None]:
    """The workflow executor's `on_node` hook: files the lines a node logs under its name, and notes its end.

    The executor runs nodes one at a time in the worker thread, so "the node running now" is one value.
    """
    def on_node(event: str, task_id: str, record: Any) -> None:
        if event == "start":
            capture.node = task_id
            capture.note("node started", node=task_id)
            return
        capture.node = ""
        if event == "failed" and record is not None:
            # the traceback, as a line of the node's: the log filtered by node reads like that node's own log
            capture.note(f"node failed after {record.attempts} tr{'y' if record.attempts == 1 else 'ies'}: "
                         f"{record.reason}" + (f"\n{record.error}" if record.error else ""), level="ERROR",
                         node=task_id)
        elif event == "success" and record is not None:
            capture.note(f"node succeeded: {record.rows} row(s)", node=task_id)
        elif event in ("blocked", "skipped", "resumed"):
            capture.note({"blocked": "node blocked: an upstream node failed", "skipped": "node skipped: still fresh",
                          "resumed": "node resumed: it succeeded in an earlier attempt"}[event], node=task_id)
    return on_node


def window_note(capture: RunLogCapture, window) -> None:
    if window is None:
        capture.note("no watermark: the pipeline reads what it reads")
    else:
        capture.note(f"window {window}")

