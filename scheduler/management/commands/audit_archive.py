"""`manage.py audit_archive show FILE [--json]`: read an audit archive back (services/audit_archive.py)."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.commands._semantics import bad_input
from scheduler.services.history.audit_archive import audit_archive_read


class Command(BaseCommand):
    help = ("Read the audit log's archive (ETL_AUDIT_ARCHIVE_DIR/audit-YYYY-MM.jsonl.gz), written by the prune "
            "before it deletes old entries.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        show = sub.add_parser("show", help="Print the entries of one archive file, oldest first.")
        show.add_argument("file", help="An audit-YYYY-MM.jsonl.gz file.")
        show.add_argument("--json", action="store_true", help="One JSON object per line, as archived.")

    def handle(self, *args, **opts):
        try:
            records = list(audit_archive_read(opts["file"]))
        except EtlError as exc:
            raise bad_input(exc) from None
        for record in records:
            if opts["json"]:
                self.stdout.write(json.dumps(record, sort_keys=True))
                continue
            target = f"{record.get('target_type', '')}:{record.get('target_id', '')}"
            reason = f"  ({record['reason']})" if record.get("reason") else ""
            self.stdout.write(f"{record.get('at', '')}  #{record['id']}  {record.get('actor', '')}  "
                              f"{record.get('action', '')}  {target}{reason}")
        if not opts["json"]:
            self.stdout.write(f"{len(records)} entries")
