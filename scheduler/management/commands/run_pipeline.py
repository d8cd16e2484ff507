"""`run_pipeline ID [--param k=v ...] [--json]`: run a pipeline or workflow once, inline, and print its report."""
from django.core.management.base import BaseCommand, CommandError

from scheduler.core import ConfigError, Executor, MemoryLedger
from scheduler.management.cli import dump_json, fail, parse_params
from scheduler.pipelines.context import RunContext
from scheduler.pipelines.params import check_params
from scheduler.pipelines.registry import UnknownTarget, get_pipeline, get_workflow, is_registered


class Command(BaseCommand):
    help = "Run a registered pipeline or workflow once in this process (no schedule, no ledger) and print the report."

    def add_arguments(self, parser):
        parser.add_argument("target", help="Pipeline or workflow id.")
        parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        params = parse_params(opts["param"])
        target = opts["target"]
        ctx = RunContext(run_id=None, schedule=f"cli:{target}", window=None, params=params, logical_time=None)
        executor = Executor(MemoryLedger())
        try:
            spec = get_workflow(target) if is_registered("workflow", target) else get_pipeline(target)
            check_params(spec.params, params)  # run params are data, as at every other door
        except UnknownTarget as exc:
            raise fail(str(exc).strip("\"'")) from None
        except ConfigError as exc:
            raise fail(f"--param {exc.field}: {exc.problem}") from None
        try:
            if is_registered("workflow", target):
                workflow = get_workflow(target)
                for node_id, factory in workflow.nodes.items():
                    executor.add_pipeline(node_id, factory(ctx))
                for upstream, downstream in workflow.deps:
                    executor.add_dep(downstream, upstream)
            else:
                executor.add_pipeline(target, get_pipeline(target).factory(ctx))
        except UnknownTarget as exc:
            raise fail(str(exc).strip("\"'")) from None
        report = executor.run()
        if opts["json"]:
            dump_json(self.stdout, report.to_dict())
        else:
            for rec in report.records:
                line = f"{rec.task_id:<28} {rec.outcome.value:<8} rows={rec.rows}"
                if rec.reason:
                    line += f"  {rec.reason}"
                self.stdout.write(line)
            for task in report.skipped:
                self.stdout.write(f"{task:<28} SKIPPED  still fresh")
            for task in report.blocked:
                self.stdout.write(f"{task:<28} BLOCKED  a prerequisite failed")
            self.stdout.write(f"total rows: {report.rows}")
        if not report.ok:
            raise CommandError("the run failed", returncode=1)
