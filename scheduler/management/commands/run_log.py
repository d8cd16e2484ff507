"""`run_log RUN [--follow] [--json]`: a run's log lines, as `/runs/<id>/log` gives them as text.

`--follow` keeps printing new lines while the run is not final (it looks every
half second), then prints the run's closing status line. A terminal's control
characters in a line (a command's colours, cursor moves, OSC sequences) are
printed escaped (`\\x1b`), never acted on. `--json` prints one
object {run, status, shown_status, lines: [...]}; with `--follow`, one object
per line as it comes (JSON Lines) and a closing {run, status, ...} object.
Exit 2 on an unknown run.
"""
import json
import time
from collections.abc import Iterator
from datetime import UTC

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduler import run_reads
from scheduler.core.userdata import terminal_safe
from scheduler.management.cli import dump_json, get_run
from scheduler.models import Run, RunLogLine

# seams for the test of --follow: the wall clock the run's end is measured with, and how it waits between looks
clock = timezone.now
sleep = time.sleep
POLL_SECONDS = 0.5
# The worker stores a run's last lines just after its final status commits: once the run is final, a follower
# stops at the first look that finds nothing new SETTLE_SECONDS after the end, and LOG_GRACE_SECONDS at the latest.
SETTLE_SECONDS = 1.0
LOG_GRACE_SECONDS = 10.0
BATCH = 5000
RUN_FIELDS = ["status", "reason", "finished_at", "stop_requested_at", "stop_kind", "stop_reason", "exit_code"]


def line_dict(line: RunLogLine) -> dict:
    return {"seq": line.seq, "at": line.at.astimezone(UTC), "level": line.level, "source": line.source,
            "message": line.message}


def closing_line(run: Run) -> str:
    """'run 12 of orders: CANCELLED (cancelled by olivia), exit code -15'."""
    text = f"run {run.pk} of {run.schedule.name}: {run.shown_status}"
    if run.stopping:
        text += f" ({run.stop_reason})" if run.stop_reason else ""
    elif run.reason:
        text += f" ({run.reason})"
    if run.exit_code is not None:
        text += f", exit code {run.exit_code}"
    return terminal_safe(text)  # a reason may quote what the command printed


class Command(BaseCommand):
    help = "Print a run's log lines (time UTC, level, source, message); --follow prints new ones until it ends."

    def add_arguments(self, parser):
        parser.add_argument("run", help="The run's id.")
        parser.add_argument("--follow", "-f", action="store_true",
                            help="Keep printing new lines until the run is final, then its closing status.")
        parser.add_argument("--json", action="store_true", help="Machine-readable output (JSON Lines with --follow).")

    def handle(self, *args, **opts):
        run = get_run(opts["run"])
        if not opts["follow"]:
            if opts["json"]:
                lines = self._lines(run, after=0)
                dump_json(self.stdout, {**self._status(run), "lines": [line_dict(line) for line in lines]})
            else:
                for batch in self._batches(run, after=0):  # printed as read: memory stays one batch
                    for line in batch:
                        self.stdout.write(run_reads.log_line_text(line))
            return
        try:
            self._follow(run, as_json=opts["json"])
        except KeyboardInterrupt:
            raise CommandError("interrupted", returncode=130) from None

    def _batches(self, run: Run, *, after: int) -> Iterator[list[RunLogLine]]:
        while True:
            batch = run_reads.run_log_lines(run, after=after, limit=BATCH)
            yield batch
            if len(batch) < BATCH:
                return
            after = batch[-1].seq

    def _lines(self, run: Run, *, after: int) -> list[RunLogLine]:
        return [line for batch in self._batches(run, after=after) for line in batch]

    def _follow(self, run: Run, *, as_json: bool) -> None:
        last = 0
        while True:
            run.refresh_from_db(fields=RUN_FIELDS)  # before the lines: a line stored before the end is not missed
            new = self._lines(run, after=last)
            for line in new:
                text = json.dumps(line_dict(line), default=str) if as_json else run_reads.log_line_text(line)
                self.stdout.write(text)
            if new:
                last = new[-1].seq
                self.stdout.flush()
            if run.is_final:
                since = (clock() - run.finished_at).total_seconds() if run.finished_at else LOG_GRACE_SECONDS
                if (not new and since >= SETTLE_SECONDS) or since >= LOG_GRACE_SECONDS:
                    break
            sleep(POLL_SECONDS)
        self.stdout.write(json.dumps(self._status(run), default=str) if as_json else closing_line(run))

    def _status(self, run: Run) -> dict:
        return {"run": run.pk, "schedule": run.schedule.name, "status": run.status, "shown_status": run.shown_status,
                "reason": run.reason, "stop_kind": run.stop_kind, "stop_reason": run.stop_reason,
                "exit_code": run.exit_code}
