"""`manage.py rerun_from_failure RUN_ID [--reason ...] [--json]`: re-run a failed workflow run, skipping what
succeeded (a dbt run: only what failed or was skipped, and its children; docs/dbt.md)."""
import getpass

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.commands._semantics import bad_input, dump
from scheduler.models import Run, TargetKind
from scheduler.services.worker.dbt import dbt_rerun_select
from scheduler.services.runs.nodes import nodes_done, run_rerun_from_failure
from scheduler.services.access.teams import authorize


class Command(BaseCommand):
    help = ("Queue a new run of a FAILED or CANCELLED workflow run with the same params and window; nodes that "
            "already succeeded for it are not run again (docs/semantics.md, 'Workflows').")

    def add_arguments(self, parser):
        parser.add_argument("run_id", help="The failed workflow run's id.")
        parser.add_argument("--reason", default="", help="Why (kept in the audit log).")
        parser.add_argument("--actor", default=None,
                            help="Who asks for it (default: the shell user); a user is held to their teams.")
        parser.add_argument("--json", action="store_true", help="Print {run, rerun_of, skips} as JSON.")

    def handle(self, *args, **options):
        try:
            run_id = int(str(options["run_id"]).strip())
        except ValueError:
            raise bad_input(f"run_id: {options['run_id']!r} is not a run id") from None
        run = Run.objects.select_related("schedule").filter(pk=run_id).first()
        if run is None:
            raise bad_input(f"run_id: unknown run {run_id}")
        skips = sorted(nodes_done(run))
        actor = "user:" + (options["actor"] or getpass.getuser())
        try:
            authorize(actor=actor, perm="scheduler.trigger_schedule", obj=run)  # as the page asks
            new = run_rerun_from_failure(run=run, actor=actor, reason=options["reason"])
        except EtlError as exc:
            raise bad_input(f"{exc.field}: {exc}" if getattr(exc, "field", None) else exc) from None
        if run.schedule.target_kind == TargetKind.DBT:
            selects = dbt_rerun_select(run)
            if options["json"]:
                dump(self, {"run": new.pk, "rerun_of": run.pk, "schedule": run.schedule.name, "selects": selects})
                return
            self.stdout.write(f"run {new.pk} re-runs run {run.pk} of '{run.schedule.name}' from its failure: dbt build "
                              + (f"--select {' '.join(selects)}" if selects else "of all of it (no node had failed)"))
            return
        if options["json"]:
            dump(self, {"run": new.pk, "rerun_of": run.pk, "schedule": run.schedule.name, "skips": skips})
            return
        self.stdout.write(f"run {new.pk} re-runs run {run.pk} of '{run.schedule.name}' from its failure; "
                          f"skips {', '.join(skips) if skips else 'nothing (no node had succeeded)'}")
