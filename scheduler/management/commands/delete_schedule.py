"""`delete_schedule SCHEDULE [--stop-runs] [--reason R] [--actor NAME] [--json]`: delete a schedule."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.management.cli import dump_json, fail
from scheduler.services.access.teams import authorize
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_removal import DELETED, schedule_delete, unfinished_runs
from scheduler.services.definitions.schedules import schedule_get


class Command(BaseCommand):
    help = ("Delete a schedule and its run history. Unfinished runs (QUEUED, WAITING, RUNNING, STOPPING) refuse it, "
            "naming them (exit 2), unless --stop-runs: they are stopped as a cancel does and the schedule is "
            "deleted once none is left (at once, or by governance when a run's code takes time to stop).")

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument("--stop-runs", action="store_true",
                            help="Stop its unfinished runs first (as cancel_run does), then delete it.")
        parser.add_argument("--reason", default="", help="Why (kept in the audit log).")
        parser.add_argument("--actor", default=None,
                            help="Who deletes it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--json", action="store_true", help="Print {schedule, status, stopping_runs}.")

    def handle(self, *args, **opts):
        try:
            schedule = schedule_get(opts["schedule"])
            actor = "user:" + (opts["actor"] or getpass.getuser())
            authorize(actor=actor, perm="scheduler.delete_schedule", obj=schedule)
            status = schedule_delete(schedule=schedule, actor=actor, reason=opts["reason"],
                                     stop_runs=opts["stop_runs"])
        except ServiceError as exc:
            raise fail(str(exc)) from None
        stopping = [] if status == DELETED else [pk for pk, _ in unfinished_runs(schedule.pk)]
        if opts["json"]:
            dump_json(self.stdout, {"schedule": schedule.name, "status": status, "stopping_runs": stopping})
        elif status == DELETED:
            self.stdout.write(f"deleted {schedule.name}")
        else:
            self.stdout.write(f"deleting {schedule.name}: stopping run(s) {', '.join(map(str, stopping))}; it is "
                              "deleted when they have ended (governance finishes it)")
