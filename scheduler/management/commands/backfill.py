"""`manage.py backfill SCHEDULE --from --to --window ... --reason ...`: reprocess a historical range."""
import getpass
import time

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.cli import check_number, parse_params
from scheduler.management.commands._semantics import bad_input, dump, get_schedule
from scheduler.models import Backfill
from scheduler.services.admission.backfills import backfill_progress, backfill_submit
from scheduler.services.access.teams import authorize

FINISHED = ("COMPLETED", "CANCELLED")


def progress_bar(progress: dict, width: int = 30) -> str:
    """`[#####-----] 5/10 done, 1 failed, 2 running`: a text bar, no dependency needed."""
    total = max(progress["total"], 1)
    finished = progress["done"] + progress["failed"] + progress["cancelled"]
    filled = int(width * finished / total)
    return (f"[{'#' * filled}{'-' * (width - filled)}] {progress['done']}/{progress['total']} done, "
            f"{progress['failed']} failed, {progress['running'] + progress['queued']} running")


def pause(seconds: float) -> None:
    """Between two progress checks (tests replace it with a dispatcher round)."""
    time.sleep(seconds)


def wait_for(command, backfill, *, poll: float) -> dict:
    """Redraw the bar until the backfill is completed or cancelled; returns the last progress."""

    err = command.stderr
    while True:
        backfill = Backfill.objects.get(pk=backfill.pk)
        progress = backfill_progress(backfill)
        err.write("\r" + progress_bar(progress) + f" ({backfill.status.lower()})", ending="")
        err.flush()
        if backfill.status in FINISHED:
            err.write("")
            return progress
        pause(poll)


def _skipped_note(backfill) -> str:
    """`; 19 already succeeded, skipped` after a --reprocess failed submit that left windows out."""
    skipped = getattr(backfill, "skipped_windows", 0)
    return f"; {skipped} already succeeded, skipped" if skipped else ""


class Command(BaseCommand):
    help = ("Submit a backfill: split the range into windows and run them through the queue. Datetime ranges are "
            "[--from, --to) (a calendar month is from its first day to the next month's first day); integer "
            "ranges are (--from, --to].")

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id (it must have a watermark config).")
        parser.add_argument("--from", dest="start", required=True,
                            help="Range start: ISO datetime (included) or integer (excluded).")
        parser.add_argument("--to", dest="end", required=True,
                            help="Range end: ISO datetime (excluded) or integer (included).")
        parser.add_argument("--param", action="append", metavar="KEY=VALUE",
                            help="Param given to every window's run (repeatable), e.g. --param table=fact_replay.")
        parser.add_argument("--window", required=True, help="Window size: seconds (datetime marks) or a count.")
        parser.add_argument("--reason", required=True, help="Why (kept with the backfill and in the audit log).")
        parser.add_argument("--max-parallel", default="1", help="Windows running at once (default 1).")
        parser.add_argument("--newest-first", action="store_true",
                            help="Queue the latest window first (default: oldest first).")
        parser.add_argument("--reprocess", default="all", metavar="failed|all",
                            help="all (default): every window of the range; failed: only the windows without a "
                                 "succeeded run of this schedule for exactly that window (failed or missing).")
        parser.add_argument("--actor", default=None,
                            help="Who asks for it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--wait", action="store_true", help="Show a progress bar until the backfill ends.")
        parser.add_argument("--poll", type=float, default=1.0, help="Seconds between progress checks with --wait.")
        parser.add_argument("--json", action="store_true", help="Print the backfill as JSON.")

    def handle(self, *args, **options):
        check_number(options["poll"], option="--poll")  # before the backfill exists: a re-run would duplicate it
        schedule = get_schedule(options["schedule"])
        actor = "user:" + (options["actor"] or getpass.getuser())
        try:
            authorize(actor=actor, perm="scheduler.manage_backfill", obj=schedule)
            backfill = backfill_submit(
                schedule=schedule, start=options["start"], end=options["end"], window=options["window"],
                reason=options["reason"], requested_by=actor, max_parallel=options["max_parallel"],
                params=parse_params(options["param"]), newest_first=options["newest_first"],
                reprocess=options["reprocess"],
            )
        except EtlError as exc:
            raise bad_input(exc) from None
        if not options["json"]:
            self.stdout.write(f"backfill {backfill.pk} of '{schedule.name}': {backfill.total_windows} window(s) "
                              f"from {backfill.range_from} to {backfill.range_to}" + _skipped_note(backfill))
        progress = backfill_progress(backfill)
        if options["wait"]:
            progress = wait_for(self, backfill, poll=options["poll"])
            backfill.refresh_from_db()
        if options["json"]:
            dump(self, {"id": backfill.pk, "schedule": schedule.name, "status": backfill.status,
                        "from": backfill.range_from, "to": backfill.range_to, "window": backfill.window_size,
                        "max_parallel": backfill.max_parallel, "params": backfill.params, "progress": progress})
        elif options["wait"]:
            self.stdout.write(f"backfill {backfill.pk} {backfill.status.lower()}: {progress_bar(progress)}")
