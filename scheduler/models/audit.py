from django.db import models

from scheduler.models.choices import ActorKind


class AuditQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise PermissionError("the audit log is append-only")

    def delete(self):
        raise PermissionError("the audit log is append-only")


class AuditEntry(models.Model):
    """Append-only record of who did what to which object, and why."""

    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=150, help_text="User name or system component.")
    actor_kind = models.CharField(max_length=8, choices=ActorKind.choices, default=ActorKind.SYSTEM)
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. schedule.create, run.trigger, breaker.open")
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64, blank=True)
    target_repr = models.CharField(max_length=200, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.CharField(max_length=500, blank=True)
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
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target_type}:{self.target_id}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise PermissionError("the audit log is append-only")
        super().save(*args, **kwargs)

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
