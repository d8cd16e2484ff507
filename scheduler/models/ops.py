from django.db import models

from scheduler.models.choices import AlertKind, AlertStatus


class LoopLease(models.Model):
    """A database lease: exactly one holder of each loop across all clusters."""

    name = models.CharField(max_length=64, primary_key=True, help_text="dispatch or governance.")
    holder = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


class GovernanceTick(models.Model):
    """One pass of the governance loop and what it did."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    holder = models.CharField(max_length=200, blank=True)
    actions = models.JSONField(default=dict, blank=True, help_text="Counts and ids of what the tick changed.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]


class Alert(models.Model):
    """An alert sent to operators; one per incident, not one per tick."""

    kind = models.CharField(max_length=32, choices=AlertKind.choices)
    incident_key = models.CharField(max_length=200, unique=True)
    schedule = models.ForeignKey("scheduler.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    run = models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    message = models.TextField()
    channels = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=AlertStatus.choices, default=AlertStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField()
    sent_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True, help_text="When a sender claimed it (status SENDING).")
    next_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="When a FAILED alert is tried again; empty once it has no attempts left."
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="alert_due"),
            models.Index(fields=["created_at"], name="alert_created_idx"),  # the prune reads oldest first
        ]


class RunTally(models.Model):
    """Runs that became final, counted as they end (the `etl_runs_finished_total` counter).

    Each run's end inserts a row in its own transaction (an insert waits on no
    other writer's lock); governance folds the rows into one per status now and
    then, so a scrape sums a handful of rows instead of counting the ledger.
    """

    status = models.CharField(max_length=16, help_text="The final status the runs reached.")
    n = models.BigIntegerField(help_text="How many runs reached it.")

    def __str__(self) -> str:
        return f"{self.n} {self.status}"
