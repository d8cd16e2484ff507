"""`manage.py backfill_status ID`: progress and windows of a backfill."""
from django.core.management.base import BaseCommand

from scheduler.management.commands._semantics import bad_input, dump
from scheduler.management.commands.backfill import progress_bar
from scheduler.models import Backfill, BackfillWindow
from scheduler.models.run import interval_text
from scheduler.services.admission.backfills import backfill_progress


class Command(BaseCommand):
    help = "Show a backfill's status, progress (done / failed / running / total) and windows."

    def add_arguments(self, parser):
        parser.add_argument("backfill_id", help="Backfill id.")
        parser.add_argument("--windows", action="store_true", help="List every window.")
        parser.add_argument("--json", action="store_true", help="Print JSON (always with windows).")

    def handle(self, *args, **options):
        raw = options["backfill_id"]
        if not str(raw).isdigit():
            raise bad_input(f"backfill_id: must be a whole number, got {raw!r}")
        backfill = Backfill.objects.select_related("schedule").filter(pk=int(raw)).first()
        if backfill is None:
            raise bad_input(f"backfill_id: unknown backfill {raw}")
        progress = backfill_progress(backfill)
        windows = list(BackfillWindow.objects.filter(backfill=backfill).order_by("seq")
                       .values("seq", "low", "high", "status", "attempts", "run_id"))
        if options["json"]:
            dump(self, {"id": backfill.pk, "schedule": backfill.schedule.name, "status": backfill.status,
                        "from": backfill.range_from, "to": backfill.range_to, "window": backfill.window_size,
                        "max_parallel": backfill.max_parallel, "reason": backfill.reason,
                        "requested_by": backfill.requested_by, "created_at": backfill.created_at,
                        "finished_at": backfill.finished_at, "progress": progress, "windows": windows})
            return
        self.stdout.write(f"backfill {backfill.pk} of '{backfill.schedule.name}' ({backfill.status.lower()}), "
                          f"requested by {backfill.requested_by}: {backfill.reason}")
        self.stdout.write(progress_bar(progress))
        if options["windows"]:
            for w in windows:
                self.stdout.write(f"  #{w['seq']:<4} {interval_text(w['low'], w['high'])}  {w['status']:<9} "
                                  f"attempts {w['attempts']}  run {w['run_id'] or '-'}")
