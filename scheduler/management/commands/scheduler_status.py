"""`scheduler_status [--json]`: active runs, queue per class, loop leases, last governance tick."""
from django.core.management.base import BaseCommand

from scheduler import selectors
from scheduler.management.cli import dump_json


class Command(BaseCommand):
    help = "Show active runs, queue depth per workload class, loop leases and the last governance tick."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        snap = selectors.status_snapshot()
        if opts["json"]:
            dump_json(self.stdout, snap)
            return
        w = self.stdout.write
        gov = snap["governance"]
        if gov["last_tick"] is None:
            w(self.style.WARNING("governance: no tick yet (is a cluster running?)"))
        elif gov["late"]:
            w(self.style.WARNING(f"governance: LATE, last tick {gov['age_seconds']:.0f} s ago"))
        else:
            w(f"governance: last tick {gov['age_seconds']:.0f} s ago")
        w("leases:")
        for lease in snap["leases"] or [{"name": "-", "holder": "none yet", "live": False, "expires_at": None}]:
            w(f"  {lease['name']:<11} {'live' if lease['live'] else 'free'}  {lease['holder']}")
        w("queue (running/limit, queued, waiting):")
        for q in snap["queue"]:
            w(f"  {q['name']:<12} {q['running']}/{q['limit']}  queued {q['queued']}  waiting {q['waiting']}")
        w(f"active runs: {len(snap['active_runs'])}")
        for r in snap["active_runs"]:
            w(f"  #{r['id']} {r['schedule']} ({r['target']}) worker={r['worker'] or '-'} heartbeat={r['heartbeat_at']}")
