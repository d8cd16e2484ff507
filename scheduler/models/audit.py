from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from datetime import timezone as dt_timezone

from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone

from scheduler.models.choices import ActorKind
from scheduler.models.fields import MaskedCharField, MaskedJSONField


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("the audit log is append-only")

    def delete(self):
        raise PermissionError("the audit log is append-only")

    def bulk_create(self, objs, *args, **kwargs):
        """Entries and their hours' counts (AuditCount) in one transaction."""
        objs = list(objs)
        with transaction.atomic(using=self.db, savepoint=False):
            created = super().bulk_create(objs, *args, **kwargs)
            audit_counted(objs)
        return created


class AuditEntry(models.Model):
    """Append-only record of who did what to which object, and why."""

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=150, help_text="User name or system component.")
    actor_kind = models.CharField(max_length=8, choices=ActorKind.choices, default=ActorKind.SYSTEM)
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. schedule.create, run.trigger, breaker.open")
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200, blank=True)
    before = MaskedJSONField(null=True, blank=True)
    after = MaskedJSONField(null=True, blank=True)
    reason = MaskedCharField(max_length=500, blank=True)
    via = models.CharField(
        max_length=100, blank=True,
        help_text="The door it came through when not the user's own session, e.g. 'API token k3x9'.",
    )
    # a plain id, not a foreign key: deleting a team must never touch the append-only log
    team_id = models.BigIntegerField(
        null=True, blank=True, db_index=True, help_text="The team that owned the target when this happened."
    )

    objects = AuditQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["target_type", "target_id"], name="audit_target_idx"),
            models.Index(fields=["actor", "-at"], name="audit_actor_idx"),
            # the latest prune (/metrics, history_status): the loop writes an entry every ETL_PRUNE_INTERVAL that
            # deletes rows, about 100,000 a year and never deleted; through the `action` index PostgreSQL sorted
            # them all on each scrape. Partial: no other entry pays for it.
            models.Index(fields=["id"], condition=models.Q(action="history.prune"), name="audit_prune_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target_type}:{self.target_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise PermissionError("the audit log is append-only")
        # the entry and its hour's count commit together (no savepoint inside the caller's transaction)
        with transaction.atomic(using=kwargs.get("using"), savepoint=False):
            super().save(*args, **kwargs)
            audit_counted([self])

    def delete(self, *args, **kwargs):
        raise PermissionError("the audit log is append-only")


class RefusalCount(models.Model):
    """Permission refusals counted per actor, permission, object and window.

    The first refusal of a window is an audit entry (`audit_entry_id`); the
    repeats only raise `count`, so a script that asks again and again cannot
    flood the append-only log.
    """

    actor = models.CharField(max_length=150)
    permission = models.CharField(max_length=100)
    target = models.CharField(max_length=140, blank=True, help_text="<type>:<id> of the refused object; empty: none.")
    window_start = models.DateTimeField(help_text="Start of the window the refusals are counted in.")
    count = models.PositiveIntegerField(default=1)
    first_at = models.DateTimeField()
    last_at = models.DateTimeField(db_index=True)
    audit_entry_id = models.BigIntegerField(null=True, blank=True, help_text="The window's audit entry.")

    class Meta:
        ordering = ["-last_at"]
        constraints = [
            models.UniqueConstraint(fields=["actor", "permission", "target", "window_start"],
                                    name="refusal_count_per_window"),
        ]

    def __str__(self) -> str:
        return f"{self.count} x {self.actor} refused {self.permission} on {self.target or '-'}"


class AuditCount(models.Model):
    """Audit entries counted per hour, team, actor and action: what the audit report's counts read.

    Kept as the log is written, like RunTally: each entry written inserts a delta row (n = 1, or one row per
    key for a batch) in the entry's own transaction, so no writer waits on another's counter row; an entry
    deleted after its archive inserts n = -1. Governance folds the deltas into one row per key
    (services/audit_counts.py). The sum of `n` over a key is always the number of its entries in the log.
    A derived table, not the log: no admin, never edited by hand.
    """

    hour = models.DateTimeField(help_text="UTC start of the hour of the entries' `at`.")
    team_id = models.BigIntegerField(null=True, blank=True, help_text="The entries' team_id (as AuditEntry's).")
    actor = models.CharField(max_length=150)
    action = models.CharField(max_length=64)
    n = models.BigIntegerField(help_text="How many entries; negative for entries deleted after their archive.")
    folded = models.BooleanField(
        default=False, help_text="A fold's sum of its key (one per key, give or take a race); false: a delta."
    )

    class Meta:
        indexes = [
            models.Index(fields=["hour"], name="auditcount_hour_idx"),
            # the fold reads the deltas oldest first; the folded rows (nearly all) stay out of that index
            models.Index(fields=["id"], condition=Q(folded=False), name="auditcount_delta_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.n} x {self.actor} {self.action} at {self.hour:%Y-%m-%d %H}h"


def audit_hour(at: datetime | str) -> datetime:
    """The UTC start of the hour of an entry's `at` (a string or a naive value read as the ORM reads it)."""
    value = AuditEntry._meta.get_field("at").to_python(at)
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_default_timezone())
    return value.astimezone(dt_timezone.utc).replace(minute=0, second=0, microsecond=0)


def audit_counted(entries: Iterable[AuditEntry], *, sign: int = 1) -> None:
    """Count written entries (sign -1: deleted ones) into AuditCount deltas; call in the entries' transaction."""
    audit_count_deltas(((e.at, e.team_id, e.actor, e.action) for e in entries), sign=sign)


def audit_count_deltas(keys: Iterable[tuple[datetime | str, int | None, str, str]], *, sign: int = 1) -> None:
    """One delta row per (hour, team_id, actor, action) of the (at, team_id, actor, action) given."""
    counts = Counter((audit_hour(at), team_id, actor, action) for at, team_id, actor, action in keys)
    AuditCount.objects.bulk_create([
        AuditCount(hour=hour, team_id=team_id, actor=actor, action=action, n=sign * n)
        for (hour, team_id, actor, action), n in counts.items()
    ])


def audit_delete_archived(ids: list[int]) -> int:
    """The one way past the append-only guard: entries an archive has already written and fsynced.

    Only `services/audit_archive.py` calls it, after the fsync; every other path (the manager, a queryset,
    an instance, the admin) still refuses to delete or change an entry. The entries' counts go down in the
    same transaction (negative AuditCount deltas), so the counts never include an entry no longer in the log.
    """
    # a plain QuerySet, not the guarded AuditQuerySet: the rows go in one DELETE (nothing refers to them)
    entries = models.QuerySet(model=AuditEntry)
    with transaction.atomic():
        # locked: an archive pass running beside this one waits, then finds these rows gone and counts none twice
        keys = list(entries.select_for_update().filter(pk__in=ids).values_list("pk", "at", "team_id", "actor",
                                                                                 "action"))
        deleted = entries.filter(pk__in=[key[0] for key in keys]).delete()[0]
        audit_count_deltas((key[1:] for key in keys), sign=-1)
    return deleted
