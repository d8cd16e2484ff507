"""`detach_schedule SCHEDULE [--reason R] [--actor NAME]`: let a file-managed schedule be edited elsewhere."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.management.cli import fail
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_source import managed_by, schedule_detach
from scheduler.services.definitions.schedules import schedule_get


class Command(BaseCommand):
    help = ("Detach a schedule from the schedules file that manages it, so the admin and the API may edit its "
            "fields (audited as schedule.detach). The next apply of a file that lists it manages it again.")

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument("--reason", default="", help="Why (kept in the audit log).")
        parser.add_argument("--actor", default=None,
                            help="Who detaches it (default: the shell user); a user is held to their teams.")

    def handle(self, *args, **opts):
        try:
            schedule = schedule_get(opts["schedule"])
            source = managed_by(schedule)
            actor = "user:" + (opts["actor"] or getpass.getuser())
            schedule_detach(schedule=schedule, actor=actor, reason=opts["reason"])
        except ServiceError as exc:
            raise fail(str(exc)) from None
        self.stdout.write(f"detached {schedule.name} from {source['file']}")
