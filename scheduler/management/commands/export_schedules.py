"""`manage.py export_schedules [NAME ...] [--output FILE]`: the schedules as a file apply_schedules reads."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from scheduler.management.cli import USAGE_ERROR
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_files import schedules_export


class Command(BaseCommand):
    help = ("Write schedules as a YAML schedules file (every field), so a schedule made in the admin can move "
            "into version control; `apply_schedules` reads it back unchanged.")

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="Only these schedules (default: all).")
        parser.add_argument("--output", "-o", default="-", help="Write to this file instead of standard output.")

    def handle(self, *args, **opts):
        try:
            text = schedules_export(opts["names"] or None)
        except ServiceError as exc:
            raise CommandError(str(exc), returncode=USAGE_ERROR) from None
        if opts["output"] == "-":
            self.stdout.write(text, ending="")
            return
        try:
            with open(opts["output"], "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise CommandError(f"--output {opts['output']}: cannot write it ({exc})", returncode=USAGE_ERROR) from None
        self.stderr.write(f"wrote {opts['output']}")
