"""`manage.py lineage_flush [--retry-now] [--json]`: send the OpenLineage outbox's due events now."""
from django.core.management.base import BaseCommand

from scheduler.management.commands._semantics import dump
from scheduler.services.integrations.lineage_send import lineage_drain


class Command(BaseCommand):
    help = ("Send the pending OpenLineage events of the outbox now (what the cluster's lineage loop does), "
            "stopping at the first failure. --retry-now also sends events still backing off.")

    def add_arguments(self, parser):
        parser.add_argument("--retry-now", action="store_true", help="Ignore the back-off of failed events.")
        parser.add_argument("--json", action="store_true", help="Print the counts as JSON.")

    def handle(self, *args, **options):
        out = lineage_drain(retry_now=options["retry_now"])
        if options["json"]:
            dump(self, out)
        else:
            self.stdout.write(f"sent {out['sent']}, failed {out['failed']}, given up {out['dead']}, "
                              f"still pending {out['pending']}")
