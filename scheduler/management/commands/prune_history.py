"""`manage.py prune_history [--older-than 30d] [--dry-run] [--batch-size N] [--json]`: retention by hand."""
from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils import timezone
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from scheduler.core import EtlError
from scheduler.management.commands._semantics import bad_input, dump
from scheduler.services.common.errors import ServiceError
from scheduler.services.history.prune import KINDS, history_estimate, history_prune, parse_age, retention_policy


class Command(BaseCommand):
    help = ("Delete history past its retention (ETL_RETENTION_*, or --older-than for every kind) in short batches, "
            "keeping what is never deleted (docs/semantics.md, Retention). Audited. --dry-run says exactly what "
            "would go, per kind.")

    def add_arguments(self, parser):
        parser.add_argument("--older-than", default=None,
                            help="Delete what is older than this (30d, 12h, 2w) instead of the settings' ages; "
                                 "a schedule's own retention_days still stands.")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", default=None, help="Rows per transaction (default ETL_PRUNE_BATCH).")
        parser.add_argument("--json", action="store_true", help="Print the counts per kind as JSON.")

    def handle(self, *args, **opts):
        now = timezone.now()
        try:
            age = parse_age(opts["older_than"], field="--older-than") if opts["older_than"] is not None else None
            batch = self._batch(opts["batch_size"])
        except EtlError as exc:
            raise bad_input(exc) from None
        policy = retention_policy(older_than=age)
        totals = history_estimate(now=now, policy=policy)
        console = Console(file=self.stderr._out, stderr=True)
        with Progress(TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), console=console,
                      transient=False) as bar:
            tasks = {kind: bar.add_task(kind, total=totals.get(kind) or 0)
                     for kind in ("runs", "ticks", "events", "alerts", "lineage", "audit")}
            counts = history_prune(now=now, policy=policy, batch=batch, dry_run=opts["dry_run"],
                                   progress=lambda kind, n: bar.advance(tasks[kind], n),
                                   actor="prune_history", always_audit=True)
            for kind, task in tasks.items():  # protected rows are counted in the estimate, never deleted
                bar.update(task, total=counts[kind], completed=counts[kind])
        if opts["json"]:
            dump(self, {"dry_run": opts["dry_run"], "older_than": opts["older_than"], "counts": counts})
            return
        verb = "would delete" if opts["dry_run"] else "deleted"
        for kind in KINDS:
            self.stdout.write(f"{kind:<13} {verb} {counts[kind]}")
        if policy.audit is None:
            self.stdout.write("audit log      kept: set ETL_AUDIT_ARCHIVE_DIR to archive and prune it")

    @staticmethod
    def _batch(raw: str | None) -> int | None:
        if raw is None:
            return None
        if not raw.strip().isdigit() or not 1 <= int(raw) <= 100_000:
            raise ServiceError(f"must be a whole number from 1 to 100000, got {raw!r}", field="--batch-size")
        return int(raw)
