"""`new_project NAME [--dir DIR]`: scaffold a team's pipelines package (scheduler/scaffold.py, docs/your-code.md)."""
from pathlib import Path

from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.management.cli import fail
from scheduler.scaffold import check_name, scaffold


class Command(BaseCommand):
    help = ("Scaffold a team's project: a package with one SQL pipeline, one command target, a schedules file, a "
            "pytest test of one window and a README (install, apply, run).")

    def add_arguments(self, parser):
        parser.add_argument("name", help="The team's short name: lowercase letters, digits, '_' (e.g. sales).")
        parser.add_argument("--dir", default=None,
                            help="Where to write it (default: ./NAME-etl); must not exist or be empty.")

    def handle(self, *args, **opts):
        try:
            name = check_name(opts["name"])
            directory = Path(opts["dir"] or f"{name.replace('_', '-')}-etl").resolve()
            written = scaffold(name, directory=directory, today=timezone.now().date())
        except ConfigError as exc:
            raise fail(f"{'--dir' if exc.field == 'dir' else exc.field}: {exc.problem}") from None
        except OSError as exc:
            raise fail(f"--dir: cannot write {exc.filename or directory}: {exc.strerror or exc}") from None
        for path in written:
            self.stdout.write(f"  {path.relative_to(directory)}")
        self.stdout.write(self.style.SUCCESS(f"{name}'s project is in {directory}"))
        self.stdout.write(f"next: pip install -e {directory} into this environment, then follow its README.md")
