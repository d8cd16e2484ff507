"""`init_production`: make a real installation ready, with no demo: the schema migrated, the workload classes and an
admin login. Idempotent: run it again on every release (it migrates; an existing login is left as it is).

The admin's password comes from stdin (`--password-stdin`) or ETL_ADMIN_PASSWORD, never from the command line (argv
is visible to every user of the machine in `ps`); it is only needed while the login does not exist yet."""
import argparse
import getpass
import os
import sys

from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from scheduler.management.cli import dump_json, fail
from scheduler.management.commands.setup_demo import demo_names
from scheduler.models import Schedule, Team, WorkloadClass
from scheduler.models.workload import DEFAULT_CLASSES
from scheduler.services.common.audit import audit_record
from scheduler.services.common.masking import mask_text

PASSWORD_ENV = "ETL_ADMIN_PASSWORD"
ACTOR = "init_production"


class Command(BaseCommand):
    help = ("Make a real installation ready, without the demo: migrate, the workload classes (standard, heavy, "
            "critical) and an admin login (password on stdin with --password-stdin, or in ETL_ADMIN_PASSWORD; never "
            "an argument). Idempotent: run it on every release.")
    stealth_options = ("stdin",)

    def add_arguments(self, parser):
        parser.add_argument("--admin-username", default="admin",
                            help="The admin login (staff, admin group: every team and the Django admin).")
        parser.add_argument("--password-stdin", action="store_true",
                            help=f"Read the admin's password from the first line of stdin (else ${PASSWORD_ENV}).")
        # only to refuse it by name (argparse would otherwise take it for --password-stdin and echo the value)
        parser.add_argument("--password", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--no-admin", action="store_true", help="Make no admin login (one exists elsewhere).")
        parser.add_argument("--json", action="store_true", help="Print what was done as JSON.")

    def handle(self, *args, **opts):
        if opts["password"] is not None:
            raise fail(f"--password: never on the command line (any user of the machine reads it in `ps`); give it "
                       f"on stdin with --password-stdin, or in {PASSWORD_ENV}")
        username = None if opts["no_admin"] else self._username(opts["admin_username"])
        exists = username is not None and self._user_exists(username)
        password = None
        if username is not None and not exists:
            password = self._password(username, from_stdin=opts["password_stdin"], stdin=opts.get("stdin"))
        elif opts["password_stdin"] or os.environ.get(PASSWORD_ENV):
            why = "--no-admin makes none" if username is None else f"the login {username!r} exists (unchanged)"
            self.stderr.write(f"password: not used: {why}; change a password with `manage.py changepassword NAME`")
        applied = self._migrate()
        with transaction.atomic():
            classes = self._classes()
            Team.default_team_id()
            created = self._admin(username, password) if password is not None else False
            audit_record(actor=ACTOR, action="install.init", target=None, reason="a production start",
                         after={"migrations_applied": len(applied), "classes_created": classes["created"],
                                "admin": username, "admin_created": created})
        demo = sorted(Schedule.objects.filter(name__in=demo_names()).values_list("name", flat=True))
        report = {"database": self._database(), "migrations_applied": applied, "workload_classes": classes,
                  "admin": None if username is None else {"username": username, "created": created},
                  "demo_schedules": demo}
        if opts["json"]:
            dump_json(self.stdout, report)
            return
        self._print(report)

    def _username(self, username: str) -> str:
        username = (username or "").strip()
        if not username:
            raise fail("--admin-username: must not be empty (--no-admin makes no login)")
        try:
            User.username_validator(username)
        except ValidationError as exc:
            raise fail(f"--admin-username: {' '.join(exc.messages)}") from None
        return username

    @staticmethod
    def _user_exists(username: str) -> bool:
        # on an empty database the table does not exist yet: nobody does
        return (User._meta.db_table in connection.introspection.table_names()
                and User.objects.filter(username=username).exists())

    def _password(self, username: str, *, from_stdin: bool, stdin) -> str:
        env = os.environ.get(PASSWORD_ENV, "")
        if from_stdin and env:
            raise fail(f"password: give it on stdin (--password-stdin) or in {PASSWORD_ENV}, not both")
        if from_stdin:
            stream = stdin or sys.stdin
            # typed at a terminal: not echoed; piped: its first line
            line = getpass.getpass("admin password: ") if stream.isatty() else stream.readline()
            password, where = line.rstrip("\r\n"), "stdin"
        else:
            password, where = env, PASSWORD_ENV
        if not password:
            raise fail(f"password: the admin login {username!r} does not exist yet and needs one: give it on stdin "
                       f"(`--password-stdin`) or in {PASSWORD_ENV} (never on the command line)"
                       + (f"; {where} was empty" if from_stdin or env else ""))
        try:
            validate_password(password, user=User(username=username))
        except ValidationError as exc:
            raise fail(f"password ({where}): {' '.join(exc.messages)}") from None
        return password

    def _migrate(self) -> list[str]:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        call_command("migrate", interactive=False, verbosity=0, database=DEFAULT_DB_ALIAS)
        return [f"{migration.app_label}.{migration.name}" for migration, backwards in plan if not backwards]

    @staticmethod
    def _classes() -> dict:
        created = []
        for name, limit, description in DEFAULT_CLASSES:
            _, made = WorkloadClass.objects.get_or_create(
                name=name, defaults={"concurrency_limit": limit, "description": description})
            if made:
                created.append(name)
        every = [{"name": c.name, "concurrency_limit": c.concurrency_limit} for c in WorkloadClass.objects.all()]
        return {"created": created, "all": every}

    @staticmethod
    def _admin(username: str, password: str) -> bool:
        user, created = User.objects.get_or_create(username=username, defaults={"is_staff": True})
        if not created:
            return False  # made by another process meanwhile: left as it is
        user.set_password(password)
        user.save(update_fields=["password"])
        user.groups.add(*Group.objects.filter(name="admin"))
        return True

    @staticmethod
    def _database() -> str:
        db = connection.settings_dict
        where = f"{db.get('HOST') or 'localhost'}:{db.get('PORT') or 'default port'}/" if db.get("HOST") else ""
        return mask_text(f"{connection.vendor} {where}{db['NAME']}")

    def _print(self, report: dict) -> None:
        applied = report["migrations_applied"]
        self.stdout.write(f"database: {report['database']}" + (
            " (the embedded SQLite: one machine; PostgreSQL through DATABASE_URL for more, docs/deploy.md)"
            if connection.vendor == "sqlite" else ""))
        self.stdout.write(f"migrations: {len(applied)} applied" if applied else "migrations: none to apply")
        classes = report["workload_classes"]
        made = f" (created: {', '.join(classes['created'])})" if classes["created"] else ""
        self.stdout.write("workload classes: " + ", ".join(
            f"{c['name']} ({c['concurrency_limit']} at once)" for c in classes["all"]) + made)
        admin = report["admin"]
        if admin is None:
            self.stdout.write("admin login: none made (--no-admin)")
        elif admin["created"]:
            self.stdout.write(self.style.SUCCESS(f"admin login: {admin['username']} created (staff, admin group: "
                                                 "every team, the Django admin at /admin/)"))
        else:
            self.stdout.write(f"admin login: {admin['username']} exists (unchanged; `manage.py changepassword "
                              f"{admin['username']}` sets a new password)")
        if report["demo_schedules"]:
            self.stdout.write(self.style.WARNING(
                f"this database holds the demo's schedules ({', '.join(report['demo_schedules'])}): delete them in "
                "the admin, or start from an empty database; `make run` keeps the demo in var/etl.sqlite3"))
        else:
            self.stdout.write("no demo: no schedules or logins of the demo")
        self.stdout.write("next: `manage.py apply_schedules schedules.yaml`, then `manage.py serve --no-cluster` "
                          "and `manage.py qcluster --name NAME` (docs/deploy.md)")
