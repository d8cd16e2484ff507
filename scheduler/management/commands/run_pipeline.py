"""`run_pipeline ID [--window LOW HIGH] [--logical-time T] [--param k=v ...] [--json]`: run a pipeline or workflow
once, inline, for one window, and print its report (scheduler/testing.py does the same in pytest)."""
from django.core.management.base import BaseCommand, CommandError

from scheduler.core import ConfigError
from scheduler.management.cli import dump_json, fail, parse_params
from scheduler.pipelines.registry import UnknownTarget
from scheduler.testing import run_window, window_of


class Command(BaseCommand):
    help = ("Run a registered pipeline or workflow once in this process (no schedule, no ledger) and print the "
            "report; --window reads one window as a scheduled run of it would.")

    def add_arguments(self, parser):
        parser.add_argument("target", help="Pipeline or workflow id.")
        parser.add_argument("--window", nargs=2, metavar=("LOW", "HIGH"), default=None,
                            help="The window to read: two ISO datetimes, [LOW, HIGH) (2026-03-01 2026-03-02 is "
                                 "that day, UTC), or two integers, (LOW, HIGH]. Without it the pipeline gets no "
                                 "window (ctx.window is None), as a schedule without a watermark.")
        parser.add_argument("--logical-time", default=None, metavar="T",
                            help="The fire time the run stands for (ISO datetime; ctx.logical_time).")
        parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        params = parse_params(opts["param"])
        try:
            window = window_of(*opts["window"]) if opts["window"] else None
            report = run_window(opts["target"], *((window.low, window.high) if window else ()), params=params,
                                logical_time=opts["logical_time"])
        except UnknownTarget as exc:
            raise fail(str(exc).strip("\"'")) from None
        except ConfigError as exc:
            option = {"low": "--window LOW", "high": "--window HIGH", "logical_time": "--logical-time"}.get(
                exc.field, f"--param {exc.field}")
            raise fail(f"{option}: {exc.problem}") from None
        if opts["json"]:
            dump_json(self.stdout, report.to_dict())
        else:
            if window is not None:
                self.stdout.write(f"window {window}")
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
