"""`manage.py apply_schedules FILE [--actor NAME] [--dry-run | --check] [--prune] [--json]`: schedules as code."""
from __future__ import annotations

import getpass
import json
import os
import sys

from django.core.management.base import BaseCommand, CommandError

from scheduler.management.cli import USAGE_ERROR, dump_json
from scheduler.services.definitions.schedule_files import UPDATE, Plan, ScheduleFileError, schedules_apply
from scheduler.services.access.teams import PermissionRefused

SIGNS = {"create": "+", "update": "~", "unchanged": "=", "delete": "-"}


def _show(value) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class Command(BaseCommand):
    help = ("Create, update (and with --prune delete) schedules so the database matches a YAML schedules file. "
            "Every entry is checked first; one invalid entry changes nothing. The plan is applied in one "
            "transaction, with an audit entry per change, as --actor and only on the teams that actor may edit; "
            "--prune deletes only schedules of the teams the file names. Each schedule it lists is then managed by the "
            "file: edits elsewhere are refused until it is detached (detach_schedule). Exits 2 on an invalid file "
            "or a refusal; with --check, 1 when the database differs from the file and 0 when it matches.")

    def add_arguments(self, parser):
        parser.add_argument("file", help="The schedules file (YAML); '-' reads standard input.")
        parser.add_argument("--dry-run", action="store_true", help="Print the plan and change nothing.")
        parser.add_argument("--check", action="store_true",
                            help="Change nothing; print the differences and exit 1 when the database differs from "
                                 "the file (a schedule, team or connection to change, a schedule it does not "
                                 "manage, with --prune one to delete), 0 when it matches: a CI gate on drift.")
        parser.add_argument("--source", default=None,
                            help="The file's name as recorded on its schedules (default: FILE's name; "
                                 "schedules.yaml for standard input).")
        parser.add_argument("--prune", action="store_true",
                            help="Delete schedules of the file's teams (the owners it names) that it does not list.")
        parser.add_argument("--actor", default=None,
                            help="Who applies it (default: the shell user); a user is held to the teams they may edit.")
        parser.add_argument("--json", action="store_true", help="Print {ok, applied, summary, plan, errors} as JSON.")
        parser.add_argument("--reason", default="", help="Recorded on every audit entry.")

    def handle(self, *args, **opts):
        text = self._read(opts["file"])
        actor = "user:" + (opts["actor"] or getpass.getuser())
        source = opts["source"] or ("schedules.yaml" if opts["file"] == "-" else os.path.basename(opts["file"]))
        dry_run = opts["dry_run"] or opts["check"]
        try:
            plan = schedules_apply(text=text, actor=actor, prune=opts["prune"], dry_run=dry_run,
                                   reason=opts["reason"] or f"apply_schedules {opts['file']}", source=source)
        except PermissionRefused as exc:
            if opts["json"]:
                dump_json(self.stdout, {"ok": False, "applied": False,
                                        "errors": [{"entry": None, "field": None, "problem": str(exc)}]})
            raise CommandError(f"{exc}; nothing was changed", returncode=USAGE_ERROR) from None
        except ScheduleFileError as exc:
            if opts["json"]:
                dump_json(self.stdout, {"ok": False, "applied": False, "errors": [p.as_dict() for p in exc.problems]})
            else:
                for problem in exc.problems:
                    self.stderr.write(f"error: {problem}")
            raise CommandError(f"{len(exc.problems)} problem(s) in {opts['file']}; nothing was changed",
                               returncode=USAGE_ERROR) from None
        if opts["json"]:
            dump_json(self.stdout, {"ok": True, "dry_run": dry_run, **plan.as_dict(), "drift": plan.drift,
                                    "errors": []})
        else:
            self._print(plan, dry_run=dry_run, source=source)
        if opts["check"]:
            if not opts["json"]:
                self.stdout.write(f"drift: the database differs from {source}" if plan.drift
                                  else f"no drift: the database matches {source}")
            if plan.drift:
                sys.exit(1)

    def _read(self, path: str) -> str:
        try:
            if path == "-":
                return sys.stdin.read()
            with open(path, encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"FILE {path}: cannot read it ({exc})", returncode=USAGE_ERROR) from None

    def _print(self, plan: Plan, *, dry_run: bool, source: str) -> None:
        for change in plan.teams:
            self.stdout.write(f"{SIGNS[change['action']]} {change['action']} team {change['name']}")
            if change["action"] == "update":
                for field, diff in change["changes"].items():
                    self.stdout.write(f"    {field}: {_show(diff['old'])} -> {_show(diff['new'])}")
        for change in plan.connections:  # the file's connections: fields, and of secrets only ***
            self.stdout.write(f"{SIGNS[change['action']]} {change['action']} connection {change['name']}")
            if change["action"] == "update":
                for field, value in change["changes"].items():
                    self.stdout.write(f"    {field}: -> {_show(value)}")
        for change in plan.changes:
            self.stdout.write(f"{SIGNS[change.action]} {change.action} {change.name}")
            if change.action == UPDATE:
                for field, (old, new) in change.shown_changes().items():
                    self.stdout.write(f"    {field}: {_show(old)} -> {_show(new)}")
        for name in plan.unmanaged:
            self.stdout.write(f"! {name} is not managed by {source} (detached, or made elsewhere)")
        s = plan.summary
        self.stdout.write(f"plan: {s['create']} to create, {s['update']} to update, {s['unchanged']} unchanged, "
                          f"{s['delete']} to delete")
        if dry_run:
            self.stdout.write("dry run: nothing was changed")
        elif plan.applied:
            self.stdout.write(self.style.SUCCESS("applied"))
        elif plan.managed:
            self.stdout.write(f"now managed by {source}: {', '.join(plan.managed)}")
        else:
            self.stdout.write("nothing to change")
