"""`manage.py freshness [--json] [--breached]`: each schedule's data age against its freshness objective."""
from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduler.management.cli import dump_json
from scheduler.services.oversight.freshness import freshness_status


class Command(BaseCommand):
    help = ("Show every enabled schedule with a freshness objective: how old its data is (last success or "
            "watermark lag), the objective, and whether governance holds it breached.")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print a JSON list.")
        parser.add_argument("--breached", action="store_true", help="Only schedules over their objective.")

    def handle(self, *args, **opts):
        rows = [r for r in freshness_status(now=timezone.now()) if r.breached or not opts["breached"]]
        if opts["json"]:
            dump_json(self.stdout, [r.as_dict() for r in rows])
            return
        if not rows:
            self.stdout.write("no schedule has a freshness objective" if not opts["breached"] else "all fresh")
        for row in rows:
            state = "BREACHED" if row.breached else "fresh"
            since = (f" (since {row.schedule.freshness_breached_at:%Y-%m-%d %H:%M:%S} UTC)"
                     if row.schedule.freshness_breached_at else "")
            self.stdout.write(f"{row.schedule.name}: {state}{since}: {row.text}")
