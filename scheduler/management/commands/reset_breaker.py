"""`manage.py reset_breaker SCHEDULE --reason ...`: close a circuit breaker and zero its count."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.commands._semantics import bad_input, dump, get_schedule
from scheduler.services.runs.breakers import breaker_reset
from scheduler.services.access.teams import authorize


class Command(BaseCommand):
    help = "Reset a schedule's circuit breaker (closed, failure count zero). Audited."

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument("--reason", required=True, help="Why (kept in the audit log).")
        parser.add_argument("--actor", default=None,
                            help="Who resets it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--json", action="store_true", help="Print the new state as JSON.")

    def handle(self, *args, **options):
        if not options["reason"].strip():
            raise bad_input("reason: a reason is required")
        schedule = get_schedule(options["schedule"])
        before = schedule.breaker_status
        actor = "user:" + (options["actor"] or getpass.getuser())
        try:
            authorize(actor=actor, perm="scheduler.reset_breaker", obj=schedule)
            breaker_reset(schedule=schedule, actor=actor, reason=options["reason"])
        except EtlError as exc:
            raise bad_input(exc) from None
        if options["json"]:
            dump(self, {"schedule": schedule.name, "before": before, "status": schedule.breaker_status,
                        "failures": schedule.breaker_failures})
        else:
            self.stdout.write(f"breaker of '{schedule.name}' reset ({before} -> {schedule.breaker_status})")
