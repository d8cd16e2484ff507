"""`cancel_run RUN [--reason TEXT] [--force] [--wait] [--timeout S] [--json] [--actor NAME]`.

A run that has not begun is CANCELLED at once. A run whose code executes is
asked to stop: it shows as STOPPING and keeps its class slot until its work has
ended, then it is CANCELLED. `--force` kills its process at once (no grace).

Exit status: 0 when the run is CANCELLED or stopping (with `--wait`: when it
ended CANCELLED); 1 when `--wait` ran out of time or the run ended otherwise;
2 on bad input (unknown run, not permitted, final already, bad --timeout).
"""
import getpass
import time

from django.core.management.base import BaseCommand, CommandError

from scheduler.management.cli import StatusLine, check_number, dump_json, fail, get_run
from scheduler.models import Run, RunStatus
from scheduler.services.runs.cancel import CANCELLED, OUTCOME_FIELDS, run_cancel_as
from scheduler.services.common.errors import ServiceError

# seams for the tests of --wait: the clock it measures the wait with, and how it waits between looks
clock = time.monotonic
sleep = time.sleep
POLL_SECONDS = 0.2


class Command(BaseCommand):
    help = ("Cancel a run (a running one is asked to stop and shows as STOPPING until its work has ended); "
            "optionally wait until it is final.")

    def add_arguments(self, parser):
        parser.add_argument("run", help="The run's id.")
        parser.add_argument("--reason", default="", help="Why (kept with the run and in the audit log).")
        parser.add_argument("--force", action="store_true",
                            help="Kill its process now instead of asking its code to stop (escalates a cancel).")
        parser.add_argument("--wait", action="store_true", help="Wait until the run is final.")
        parser.add_argument("--timeout", type=float, default=600.0, help="Seconds to wait with --wait.")
        parser.add_argument("--actor", default=None,
                            help="Who cancels it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--json", action="store_true", help="Machine-readable output.")

    def handle(self, *args, **opts):
        check_number(opts["timeout"], option="--timeout", allow_minimum=False)  # before anything changes
        run = get_run(opts["run"])
        name = opts["actor"] or getpass.getuser()
        reason = opts["reason"] or f"{'killed' if opts['force'] else 'cancelled'} by {name}"
        try:
            outcome = run_cancel_as(run=run, actor="user:" + name, reason=reason, force=opts["force"])
        except ServiceError as exc:
            raise fail(str(exc)) from None  # the message names the field
        if opts["wait"] and not run.is_final:
            self._wait(run, opts["timeout"], quiet=opts["json"])
        self._report(run, outcome, as_json=opts["json"])
        if opts["wait"] and run.status != RunStatus.CANCELLED:
            raise CommandError(f"run {run.pk} ended {run.status}" + (f" ({run.reason})" if run.reason else ""),
                               returncode=1)

    def _report(self, run: Run, outcome: str, *, as_json: bool) -> None:
        if as_json:
            dump_json(self.stdout, {
                "run": run.pk, "schedule": run.schedule.name, "outcome": outcome, "status": run.status,
                "shown_status": run.shown_status, "stop_kind": run.stop_kind, "stop_reason": run.stop_reason,
                "reason": run.reason, "exit_code": run.exit_code,
            })
            return
        head = f"run {run.pk} of {run.schedule.name}: "
        if run.stopping:
            self.stdout.write(head + f"{outcome} ({run.get_stop_kind_display().lower()}: {run.stop_reason}); it "
                              "keeps its slot until its work has ended")
        elif run.status == RunStatus.CANCELLED and outcome == CANCELLED:
            self.stdout.write(head + "CANCELLED (it had not begun)")
        else:
            self.stdout.write(head + run.status + (f" ({run.reason})" if run.reason else ""))

    def _wait(self, run: Run, timeout: float, *, quiet: bool) -> None:
        # the raw stream under self.stderr: the wrapper would end each redraw of the line with a newline
        line = StatusLine(self.stderr._out, quiet=quiet)
        began = clock()
        try:
            while True:
                run.refresh_from_db(fields=OUTCOME_FIELDS)
                elapsed = clock() - began
                if run.is_final:
                    return
                line.show(run.shown_status.lower(), elapsed)
                if elapsed >= timeout:
                    raise CommandError(f"run {run.pk} still {run.shown_status} after {timeout:g} s", returncode=1)
                sleep(POLL_SECONDS)
        finally:
            line.close()
