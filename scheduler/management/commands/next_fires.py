"""`manage.py next_fires SCHEDULE [--count N] [--after ISO] [--json]`: when a time-based schedule fires next."""
from datetime import datetime
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduler.core import EtlError
from scheduler.management.commands._semantics import bad_input, dump, get_schedule
from scheduler.triggers.registry import get_trigger


class Command(BaseCommand):
    help = ("List a cron or interval schedule's next fire times in its own time zone and in UTC "
            "(Debian cron's DST rule; see docs/semantics.md, 'Cron and time zones').")

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument("--count", type=int, default=5, help="How many fires (1-1000, default 5).")
        parser.add_argument("--after", default="", help="ISO 8601 instant to start from (default: now), "
                                                        "e.g. 2026-03-28T22:00:00+00:00 to see a DST night.")
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args, **options):
        schedule = get_schedule(options["schedule"])
        count = options["count"]
        if not 1 <= count <= 1000:
            raise bad_input(f"--count: must be from 1 to 1000, got {count}")
        after = timezone.now()
        if options["after"]:
            try:
                after = datetime.fromisoformat(options["after"].strip())
            except ValueError:
                raise bad_input(f"--after: {options['after']!r} is not an ISO 8601 date and time") from None
            if after.tzinfo is None:
                after = after.replace(tzinfo=dt_timezone.utc)
        try:
            plugin = get_trigger(schedule.trigger_kind)
            if not plugin.time_based:
                raise bad_input(f"schedule: '{schedule.name}' is a {schedule.trigger_kind} schedule; "
                                "only time-based schedules have fire times")
            fires = plugin.next_fires(schedule.trigger_config or {}, timezone=schedule.timezone, after=after,
                                      count=count)
        except EtlError as exc:
            raise bad_input(exc) from None
        tz = ZoneInfo(schedule.timezone)
        rows = [{"local": f.astimezone(tz).isoformat(), "utc": f.astimezone(dt_timezone.utc).isoformat(),
                 "zone": f.astimezone(tz).tzname()} for f in fires]
        if options["json"]:
            dump(self, {"schedule": schedule.name, "timezone": schedule.timezone, "after": after.isoformat(),
                        "fires": rows})
            return
        self.stdout.write(f"next fires of '{schedule.name}' ({schedule.timezone}):")
        for row in rows:
            self.stdout.write(f"  {row['local'][:16].replace('T', ' ')} {row['zone']:<6} = {row['utc'][:16]}Z")
