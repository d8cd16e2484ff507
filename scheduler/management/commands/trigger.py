"""`trigger SCHEDULE [--param k=v ...] [--wait] [--json]`: a manual run, recorded with its actor."""
import getpass
import os
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from scheduler.management.cli import ProgressLine, check_number, dump_json, fail, parse_params
from scheduler.models import Run, RunStatus
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_get
from scheduler.services.access.teams import authorize

STEPS = [RunStatus.QUEUED, RunStatus.RUNNING, "final"]


class Command(BaseCommand):
    help = "Trigger a schedule now, with override params; optionally wait for the outcome."

    def add_arguments(self, parser):
        parser.add_argument("schedule", help="Schedule name or id.")
        parser.add_argument(
            "--param", action="append", default=[], metavar="KEY=VALUE", help="Override param (repeatable)."
        )
        parser.add_argument("--wait", action="store_true", help="Wait until the run is final.")
        parser.add_argument("--timeout", type=float, default=600.0, help="Seconds to wait with --wait.")
        parser.add_argument(
            "--actor", default=None, help="Who triggers it (default: the shell user); a user is held to their teams."
        )
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")

    def handle(self, *args, **opts):
        check_number(opts["timeout"], option="--timeout", allow_minimum=False)  # before the run is queued
        params = parse_params(opts["param"])
        try:
            schedule = schedule_get(opts["schedule"])
            actor = "user:" + (opts["actor"] or getpass.getuser())
            authorize(actor=actor, perm="scheduler.trigger_schedule", obj=schedule)
            run = run_trigger_manual(schedule=schedule, actor=actor, params=params)
        except ServiceError as exc:
            raise fail(str(exc)) from None
        if opts["wait"]:
            run = self._wait(run, opts["timeout"], quiet=opts["json"])
        result = {"run": run.pk, "schedule": schedule.name, "status": run.status, "reason": run.reason,
                  "rows": run.rows_loaded, "params": run.params}
        if opts["json"]:
            dump_json(self.stdout, result)
        else:
            self.stdout.write(
                f"run {run.pk} of {schedule.name}: {run.status}" + (f" ({run.reason})" if run.reason else "")
            )
        if opts["wait"] and run.status not in (RunStatus.SUCCEEDED, RunStatus.SKIPPED):
            raise CommandError(f"run {run.pk} ended {run.status}", returncode=1)

    def _wait(self, run: Run, timeout: float, *, quiet: bool) -> Run:
        bar = ProgressLine(sys.stderr if not quiet else open(os.devnull, "w"))  # noqa: SIM115
        deadline = time.monotonic() + timeout
        while True:
            run.refresh_from_db()
            step = 2 if run.is_final else 1 if run.status == RunStatus.RUNNING else 0
            bar.show(step, 2, run.status)
            if run.is_final:
                bar.close()
                return run
            if time.monotonic() > deadline:
                bar.close()
                raise CommandError(f"run {run.pk} still {run.status} after {timeout:g} s", returncode=1)
            time.sleep(0.2)
