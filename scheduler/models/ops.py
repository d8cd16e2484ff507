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


class RunHourCount(models.Model):
    """Final runs counted by schedule, status, the UTC hour they started in (queued, if they never started) and the
    UTC hour they ended in: the timeline's crowded ranges read these instead of the ledger (issue 25).

    Like RunTally, each run's end inserts (`folded` false) in its own transaction and governance folds those rows
    into one per key (`folded` true, unique); a prune inserts the runs it deletes with a negative count, so the sums
    of an hour always equal the ledger's runs of that hour. `end_hour` past `hour` marks runs that reach into a later
    hour: the only rows a range reads from before its first hour (the partial index).
    """

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="+", db_index=False)
    hour = models.DateTimeField(help_text="The UTC hour the runs started in (were queued in, if they never started).")
    end_hour = models.DateTimeField(help_text="The UTC hour the runs ended in.")
    status = models.CharField(max_length=16, help_text="The final status the runs reached.")
    n = models.BigIntegerField(help_text="How many runs (negative: pruned runs not folded yet).")
    folded = models.BooleanField(default=False, help_text="One row per key, summed by governance.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "hour", "end_hour", "status"], condition=models.Q(folded=True),
                                    name="runhour_folded_key"),
        ]
        indexes = [
            models.Index(fields=["hour"], name="runhour_hour_idx"),  # a range's hours, every schedule
            models.Index(fields=["schedule", "hour"], name="runhour_sched_hour_idx"),  # the rows drawn; the FK
            # runs that started before a range and ended in it: a few rows whatever the range's distance back
            models.Index(fields=["end_hour"], condition=models.Q(end_hour__gt=models.F("hour")),
                         name="runhour_reaching_idx"),
            models.Index(fields=["id"], condition=models.Q(folded=False), name="runhour_unfolded_idx"),  # the fold
        ]

    def __str__(self) -> str:
        return f"{self.n} {self.status} of schedule {self.schedule_id} from {self.hour:%Y-%m-%d %H}h"
