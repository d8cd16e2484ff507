"""`manage.py validate_schedules`: every cycle, unknown target and invalid config; non-zero exit on any."""
from django.core.management.base import BaseCommand, CommandError

from scheduler.core import EtlError
from scheduler.management.commands._semantics import dump
from scheduler.models import Schedule
from scheduler.services.runs.dependencies import all_cycles
from scheduler.services.definitions.schedules import validate_schedule


def find_problems() -> tuple[list[str], list[dict]]:
    """(cycles spelled 'a -> b -> a', [{schedule, field, problem}])."""

    cycles = [" -> ".join(cycle) for cycle in all_cycles()]
    problems = []
    for schedule in Schedule.objects.select_related("workload_class").order_by("name"):
        try:
            # validate on the instance only: nothing is saved
            validate_schedule(schedule)
        except EtlError as exc:
            problems.append({"schedule": schedule.name, "field": getattr(exc, "field", None), "problem": str(exc)})
    return cycles, problems


class Command(BaseCommand):
    help = ("Check every schedule: dependency cycles, targets no longer registered, configs that no longer "
            "validate. Exits 1 when there is any problem.")

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print {ok, cycles, problems} as JSON.")

    def handle(self, *args, **options):
        cycles, problems = find_problems()
        ok = not cycles and not problems
        if options["json"]:
            dump(self, {"ok": ok, "cycles": cycles, "problems": problems})
        else:
            for cycle in cycles:
                self.stdout.write(f"cycle: {cycle}")
            for p in problems:
                self.stdout.write(f"{p['schedule']}: {p['problem']}")
            if ok:
                self.stdout.write("all schedules are valid")
        if not ok:
            raise CommandError(f"{len(cycles)} cycle(s), {len(problems)} invalid schedule(s)", returncode=1)
