"""`setup_demo`: demo source and warehouse databases, two demo teams owning the demo schedules, an operator
login in one team (so the other team's schedules show what view-only looks like) and an admin login."""
import os
import secrets
import sys
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from scheduler.models import Schedule, Team
from scheduler.pipelines.demo_data import create_warehouse_db, generate_source_db
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.definitions.schedules import schedule_save
from scheduler.services.access.teams import team_save, team_set_members


# A command target's script (any program would do): progress on stdout as it goes, a result file at the end.
# It checks its steps one by one, so a cancel (SIGTERM) stops it between two; the run log follows it live.
COMPACT_SCRIPT = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("asked to stop: stopping between two steps", flush=True),
                                           sys.exit(143)))
params = json.loads(os.environ["ETL_PARAMS"])
steps = int(params.get("steps", 12))
for step in range(1, steps + 1):
    print(f"compacting partition {step}/{steps}", flush=True)
    time.sleep(float(params.get("pause", 2)))
print("warehouse compacted", file=sys.stderr, flush=True)
json.dump({"rows": steps * 1000}, open(os.environ["ETL_RESULT_FILE"], "w"))
"""


# The demo's two teams and what each owns: the operator login is in the first, so the second's schedules
# show their owner and say they are view-only (docs: README, "On call with the demo logins").
DEMO_TEAMS = {
    # warehouse_compact is the demo's command target to try Cancel on: the operator's team owns it
    "ingest": ("Syncs, feeds and warehouse upkeep",
               ["customer_sync", "order_sync", "order_confirmed", "webhook_ingest", "heartbeat", "flaky_feed",
                "warehouse_compact"]),
    "analytics": ("Transforms and reports", ["revenue_transform", "daily_report", "nightly"]),
}
OPERATOR_TEAM = "ingest"


def demo_owner(name: str) -> str | None:
    return next((team for team, (_, names) in DEMO_TEAMS.items() if name in names), None)


def demo_names() -> set[str]:
    """The names of the demo's schedules."""
    return {data["name"] for data in demo_schedules(datetime.now(timezone.utc))}


def demo_schedules(now: datetime) -> list[dict]:
    initial = (now - timedelta(days=30)).replace(minute=0, second=0, microsecond=0).isoformat()
    watermark = {"type": "datetime", "column": "last_modified", "initial": initial, "lag": 5,
                 "overlap": 60, "max_window": 7 * 86400}
    return [
        {"name": "customer_sync", "description": "Hourly incremental sync of changed customers",
         "target_id": "demo.customers_sync", "trigger_kind": "cron", "trigger_config": {"cron": "0 * * * *"},
         "timezone": "Europe/Berlin", "watermark_config": watermark, "priority": 6, "workload_class": "standard"},
        {"name": "order_sync", "description": "Hourly incremental sync of changed orders",
         "target_id": "demo.orders_sync", "trigger_kind": "cron", "trigger_config": {"cron": "0 * * * *"},
         "timezone": "Europe/Berlin", "watermark_config": watermark, "priority": 6, "workload_class": "heavy"},
        {"name": "revenue_transform", "description": "Revenue by country and day, after both syncs",
         "target_id": "demo.revenue_transform", "trigger_kind": "upstream",
         "depends_on": ["customer_sync", "order_sync"], "condition": "ALL_SUCCESS", "workload_class": "standard"},
        {"name": "daily_report", "description": "CSV report after the transform",
         "target_id": "demo.daily_report", "trigger_kind": "upstream", "depends_on": ["revenue_transform"],
         "workload_class": "standard", "priority": 4,
         # an alert channel to try the test button with (EMAIL_BACKEND prints it in the demo)
         "alert_channels": ["mailto://reports-oncall@example.com"]},
        {"name": "order_confirmed", "description": "Runs for every confirmed order event",
         "target_id": "demo.order_confirmed", "trigger_kind": "event",
         "trigger_config": {"topic": "orders", "filter": "status == 'confirmed'"}, "workload_class": "critical",
         "priority": 8},
        {"name": "webhook_ingest", "description": "Records pushed by a partner's signed webhook",
         "target_id": "demo.webhook_ingest", "trigger_kind": "webhook", "workload_class": "standard"},
        {"name": "nightly", "description": "The nightly workflow", "target_kind": "workflow",
         "target_id": "demo.nightly", "trigger_kind": "cron", "trigger_config": {"cron": "30 2 * * *"},
         "timezone": "Europe/Berlin", "workload_class": "heavy"},
        {"name": "heartbeat", "description": "A no-op every 20 seconds: the loop is alive",
         "target_id": "demo.noop", "trigger_kind": "interval", "trigger_config": {"seconds": 20},
         "workload_class": "standard", "priority": 2},
        {"name": "warehouse_compact", "description": "A command target (a script, not a Python pipeline): its output "
         "is in the run log as it prints; trigger it and try Cancel", "target_kind": "command", "target_id": "",
         "command": {"argv": [sys.executable, "-c", COMPACT_SCRIPT]}, "trigger_kind": "manual",
         "timeout_seconds": 300, "workload_class": "standard", "priority": 3},
        {"name": "flaky_feed", "description": "A feed that keeps failing: watch its breaker open",
         "target_id": "demo.flaky", "trigger_kind": "interval", "trigger_config": {"seconds": 30},
         "params": {"fail": True}, "breaker_threshold": 3, "breaker_cooldown_seconds": 120,
         "retry_max_attempts": 1, "workload_class": "standard", "priority": 3},
    ]


class Command(BaseCommand):
    help = ("Create demo data, two demo teams (ingest, analytics) owning the demo schedules, an operator login in "
            "ingest and an admin login (idempotent); new logins also go to ETL_DEMO_LOGINS_FILE (mode 0600). "
            "Refuses a database that holds other schedules unless --force.")

    def add_arguments(self, parser):
        parser.add_argument("--username", default="operator",
                            help="The operator login (operator group, team ingest, not staff).")
        parser.add_argument("--admin-username", default="admin",
                            help="The admin login (staff, admin group: the Django admin); '' creates none.")
        parser.add_argument("--no-kickoff", action="store_true", help="Do not trigger the first syncs.")
        parser.add_argument("--force", action="store_true",
                            help="Add the demo even to a database that holds schedules of its own.")

    def handle(self, *args, **opts):
        if opts["admin_username"] == opts["username"]:
            raise CommandError(
                "--admin-username: must differ from --username (an operator is not an admin)", returncode=2
            )
        if not opts["force"]:
            self._refuse_a_real_database()
        now = datetime.now(timezone.utc)
        generate_source_db(settings.ETL_DEMO_SOURCE_DB, now=now)
        create_warehouse_db(settings.ETL_DEMO_WAREHOUSE_DB)
        teams = self._teams()
        created = []
        for data in demo_schedules(now):
            existing = Schedule.objects.filter(name=data["name"]).first()
            owner = teams.get(demo_owner(data["name"]))
            if existing is None:
                schedule_save(data={**data, "owner": owner}, actor="setup_demo", reason="demo")
                created.append(data["name"])
            elif owner is not None and existing.owner_id == Team.default_team_id():
                # a demo made before the demo had teams: its schedules move once; one given to a team stays
                schedule_save(data={"owner": owner}, schedule=existing, actor="setup_demo",
                              reason=f"demo: team {owner.name} owns it")
        self.stdout.write(f"demo schedules: {len(created)} created" + (f" ({', '.join(created)})" if created else ""))
        if created and not opts["no_kickoff"]:
            for name in ("customer_sync", "order_sync"):
                run_trigger_manual(schedule=Schedule.objects.get(name=name), actor="setup_demo",
                                   reason="first load of the demo")
        self.new_logins: list[str] = []
        others = ", ".join(sorted(set(DEMO_TEAMS) - {OPERATOR_TEAM}))
        self._login(opts["username"], group="operator", staff=False, label="login", team=teams[OPERATOR_TEAM],
                    what=f"team {OPERATOR_TEAM}: runs, re-runs, cancels, backfills, breakers, watermarks and "
                         f"acknowledging failures of its schedules; {others}: view only; no admin")
        if opts["admin_username"]:
            self._login(opts["admin_username"], group="admin", staff=True, label="admin login", team=None,
                        what="every team; also schedules, classes, teams and users in the Django admin")
        if self.new_logins:
            write_owner_only(settings.ETL_DEMO_LOGINS_FILE, "".join(line + "\n" for line in self.new_logins))
            self.stdout.write(f"these logins are also in {settings.ETL_DEMO_LOGINS_FILE} (readable only by you)")

    @staticmethod
    def _refuse_a_real_database() -> None:
        """The demo (its schedules, one failing every 30 s, and two logins) goes only into a database of its own."""
        others = list(Schedule.objects.exclude(name__in=demo_names()).order_by("name").values_list("name", flat=True))
        if others:
            named = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
            raise CommandError(
                f"database: it holds schedules that are not the demo's ({named}); setup_demo would add the demo's "
                "schedules, teams and logins beside them. Keep the demo in a database of its own (`make run` uses "
                "var/etl.sqlite3), prepare a real installation with `manage.py init_production`, or give --force",
                returncode=2)

    def _teams(self) -> dict[str, Team]:
        teams = {}
        for name, (description, _) in DEMO_TEAMS.items():
            teams[name] = Team.objects.filter(name=name).first() or team_save(
                data={"name": name, "description": description}, actor="setup_demo", reason="demo")
        return teams

    def _login(self, username: str, *, group: str, staff: bool, label: str, what: str, team: Team | None) -> None:
        user = User.objects.filter(username=username).first()
        if user is not None and team is not None and not user.etl_teams.exists():
            team_set_members(team=team, add=[user], actor="setup_demo", reason="demo")
        if user is not None:
            self.stdout.write(f"{label}: {username} (exists; change its password with "
                              f"`manage.py changepassword {username}`)")
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_user(username=username, password=password, is_staff=staff)
        user.groups.add(*Group.objects.filter(name=group))
        if team is not None:
            team_set_members(team=team, add=[user], actor="setup_demo", reason="demo")
        line = f"{label}: {username} / {password}   ({what}; shown once, save it now)"
        self.new_logins.append(line)
        self.stdout.write(self.style.SUCCESS(line))


def write_owner_only(path: str, text: str) -> None:
    """Write `text` to `path` readable and writable by its owner only (0600), whatever was there before."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file keeps its mode through O_CREAT
        os.write(fd, text.encode())
    finally:
        os.close(fd)
