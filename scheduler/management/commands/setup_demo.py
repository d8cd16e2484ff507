"""`setup_demo`: demo source and warehouse databases, demo schedules, an operator login and an admin login."""
import secrets
import sys
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError

from scheduler.models import Schedule
from scheduler.pipelines.demo_data import create_warehouse_db, generate_source_db
from scheduler.services.runs import run_trigger_manual
from scheduler.services.schedules import schedule_save


# A command target's script (any program would do): progress on stdout as it goes, a result file at the end.
# It checks its steps one by one, so a cancel (SIGTERM) stops it between two; the run log follows it live.
COMPACT_SCRIPT = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("asked to stop: stopping between two steps", flush=True), sys.exit(143)))
params = json.loads(os.environ["ETL_PARAMS"])
steps = int(params.get("steps", 12))
for step in range(1, steps + 1):
    print(f"compacting partition {step}/{steps}", flush=True)
    time.sleep(float(params.get("pause", 2)))
print("warehouse compacted", file=sys.stderr, flush=True)
json.dump({"rows": steps * 1000}, open(os.environ["ETL_RESULT_FILE"], "w"))
"""


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
    help = "Create demo data, demo schedules, an operator login and an admin login (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="operator", help="The operator login (operator group, not staff).")
        parser.add_argument("--admin-username", default="admin",
                            help="The admin login (staff, admin group: the Django admin); '' creates none.")
        parser.add_argument("--no-kickoff", action="store_true", help="Do not trigger the first syncs.")

    def handle(self, *args, **opts):
        if opts["admin_username"] == opts["username"]:
            raise CommandError("--admin-username: must differ from --username (an operator is not an admin)", returncode=2)
        now = datetime.now(timezone.utc)
        generate_source_db(settings.ETL_DEMO_SOURCE_DB, now=now)
        create_warehouse_db(settings.ETL_DEMO_WAREHOUSE_DB)
        created = []
        for data in demo_schedules(now):
            if not Schedule.objects.filter(name=data["name"]).exists():
                schedule_save(data=data, actor="setup_demo", reason="demo")
                created.append(data["name"])
        self.stdout.write(f"demo schedules: {len(created)} created" + (f" ({', '.join(created)})" if created else ""))
        if created and not opts["no_kickoff"]:
            for name in ("customer_sync", "order_sync"):
                run_trigger_manual(schedule=Schedule.objects.get(name=name), actor="setup_demo",
                                   reason="first load of the demo")
        self._login(opts["username"], group="operator", staff=False, label="login",
                    what="runs, backfills, breakers and watermarks; no admin")
        if opts["admin_username"]:
            self._login(opts["admin_username"], group="admin", staff=True, label="admin login",
                        what="also edits schedules and classes in the Django admin")

    def _login(self, username: str, *, group: str, staff: bool, label: str, what: str) -> None:
        user = User.objects.filter(username=username).first()
        if user is not None:
            self.stdout.write(f"{label}: {username} (exists; change its password with "
                              f"`manage.py changepassword {username}`)")
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_user(username=username, password=password, is_staff=staff)
        user.groups.add(*Group.objects.filter(name=group))
        self.stdout.write(self.style.SUCCESS(f"{label}: {username} / {password}   ({what}; shown once, save it now)"))
