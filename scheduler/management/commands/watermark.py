"""`manage.py watermark SCHEDULE [--set VALUE | --reset] --reason ...`: show or change a watermark."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.cli import check_number
from scheduler.management.commands._semantics import bad_input, dump, get_schedule
from scheduler.models import WatermarkHistory
from scheduler.services.access.teams import authorize
from scheduler.services.runs.watermarks import (
    encode_value,
    watermark_config,
    watermark_reset,
    watermark_set,
    watermark_state,
    )


class Command(BaseCommand):
    help = "Show a schedule's watermark, or set it to a value / reset it to the initial value (audited)."

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        group = parser.add_mutually_exclusive_group()
        group.add_argument("--set", dest="value", help="New value: ISO 8601 datetime or integer, per the mark's type.")
        group.add_argument("--reset", action="store_true", help="Forget the mark; the next run starts at 'initial'.")
        parser.add_argument("--reason", default="", help="Why (required with --set and --reset).")
        parser.add_argument("--force", action="store_true", help="Allow --set to a datetime in the future.")
        parser.add_argument("--actor", default=None,
                            help="Who changes it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--history", type=int, default=5, help="History entries to show (default 5).")
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args, **options):
        check_number(options["history"], option="--history")
        schedule = get_schedule(options["schedule"])
        config = watermark_config(schedule)
        if config is None:
            raise bad_input(f"schedule: '{schedule.name}' has no watermark")
        before = encode_value(watermark_state(schedule, config).value) or None
        changed = options["reset"] or options["value"] is not None
        actor = "user:" + (options["actor"] or getpass.getuser())
        try:
            if changed:
                authorize(actor=actor, perm="scheduler.manage_watermark", obj=schedule)
            if options["reset"]:
                watermark_reset(schedule=schedule, actor=actor, reason=options["reason"])
            elif options["value"] is not None:
                watermark_set(schedule=schedule, value=options["value"], actor=actor,
                              reason=options["reason"], force=options["force"])
        except EtlError as exc:
            raise bad_input(exc) from None
        value = encode_value(watermark_state(schedule, config).value) or None
        history = [
            {"at": h.at.isoformat(), "kind": h.kind, "old": h.old_value or None, "new": h.new_value or None,
             "run": h.run_id, "actor": h.actor, "reason": h.reason}
            for h in WatermarkHistory.objects.filter(schedule=schedule).order_by("-at", "-id")[: options["history"]]
        ]
        if options["json"]:
            dump(self, {"schedule": schedule.name, "type": config.type.value, "column": config.column,
                        "before": before, "value": value, "changed": changed, "history": history})
            return
        if changed:
            self.stdout.write(f"watermark of '{schedule.name}': {before or '(initial)'} -> {value or '(initial)'}")
        else:
            self.stdout.write(f"watermark of '{schedule.name}' ({config.type.value}, column {config.column or '-'}): "
                              f"{value or '(initial)'}")
        for h in history:
            self.stdout.write(f"  {h['at']}  {h['kind']:<7} {h['old'] or '-'} -> {h['new'] or '-'}  "
                              f"{h['actor'] or ('run ' + str(h['run']) if h['run'] else '')} {h['reason']}")
