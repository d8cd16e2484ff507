"""What stays of runs once they end: the counters kept as runs end (tally, hour counts, audit counts, latest outcomes,
backfill progress), retention and pruning, the audit archive.
"""
from scheduler.services.history.prune import history_prune, prune_tick, history_status, retention_policy
from scheduler.services.history.tally import tally_fold, tally_totals
from scheduler.services.history.hour_counts import hour_counts_fold
from scheduler.services.history.outcomes import outcomes_record, outcomes_rebuild
from scheduler.services.history.audit_archive import audit_archive_batch

__all__ = [
    "history_prune", "prune_tick", "history_status", "retention_policy", "tally_fold", "tally_totals",
    "hour_counts_fold", "outcomes_record", "outcomes_rebuild", "audit_archive_batch"
]
