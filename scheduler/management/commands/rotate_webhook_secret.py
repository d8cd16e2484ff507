"""`rotate_webhook_secret SCHEDULE [--json]`: a new webhook secret, printed once."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.management.cli import dump_json, fail
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedules import schedule_get
from scheduler.services.access.teams import authorize
from scheduler.services.admission.webhooks import webhook_rotate_secret


class Command(BaseCommand):
    help = "Give a webhook schedule a new secret. The old one stops working at once; the new one is shown only now."

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument("--reason", default="", help="Why (kept in the audit log).")
        parser.add_argument(
            "--actor", default=None, help="Who rotates it (default: the shell user); a user is held to their teams."
        )
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")

    def handle(self, *args, **opts):
        try:
            schedule = schedule_get(opts["schedule"])
            actor = "user:" + (opts["actor"] or getpass.getuser())
            authorize(actor=actor, perm="scheduler.change_schedule", obj=schedule)
            secret = webhook_rotate_secret(schedule=schedule, actor=actor, reason=opts["reason"])
        except ServiceError as exc:
            raise fail(str(exc)) from None
        if opts["json"]:
            dump_json(self.stdout, {"schedule": schedule.name, "secret": secret, "url": f"/hooks/{schedule.name}"})
            return
        self.stdout.write(f"new webhook secret for {schedule.name} (shown once, store it now):\n{secret}")
