from django.db import models

from scheduler.models.choices import AlertKind, AlertStatus, RunStatus
from scheduler.models.fields import MaskedTextField


class LoopLease(models.Model):
    """A database lease: exactly one holder of each loop across all clusters."""

    name = models.CharField(max_length=64, primary_key=True, help_text="dispatch or governance.")
    holder = models.CharField(max_length=200, blank=True)
    acquired_at = models.DateTimeField(null=True, blank=True)
    renewed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} held by {self.holder or 'nobody'}"


class Cluster(models.Model):
    """A running `qcluster` process, as it announced itself: the code it runs and the targets it knows.

    Each cluster writes its row as it starts and every ETL_CODE_CHECK_SECONDS after (a row not seen for three of
    those is a cluster gone), deletes it as it stops, and reads `reload_requested_at` to roll out new code
    (services/clusters.py).
    """

    holder = models.CharField(max_length=200, primary_key=True, help_text="name@host:pid:nonce, as its leases.")
    name = models.CharField(max_length=100, help_text="Its --name (ETL_CLUSTER_ID).")
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField(help_text="Its last beat.")
    code_version = models.CharField(max_length=500, blank=True,
                                    help_text="Its packages and one digest over its pipeline modules.")
    code = models.JSONField(default=dict, blank=True, help_text="Packages -> versions, modules -> digests loaded.")
    targets = models.JSONField(default=list, blank=True, help_text="'pipeline:ID' and 'workflow:ID' it knows.")
    problems = models.JSONField(default=list, blank=True, help_text="Packages whose pipelines failed to load.")
    reload_requested_at = models.DateTimeField(null=True, blank=True,
                                               help_text="Asked to restart its workers (reload_workers, SIGHUP).")
    reload_reason = models.CharField(max_length=300, blank=True)
    draining_since = models.DateTimeField(null=True, blank=True,
                                          help_text="Finishing its running runs before it restarts or stops.")

    class Meta:
        ordering = ["name", "host", "pid"]

    def __str__(self) -> str:
        return f"cluster {self.holder}"


class GovernanceTick(models.Model):
    """One pass of the governance loop and what it did."""

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    holder = models.CharField(max_length=200, blank=True)
    actions = models.JSONField(default=dict, blank=True, help_text="Counts and ids of what the tick changed.")
    error = MaskedTextField(blank=True)

    class Meta:
        ordering = ["-started_at"]


class Alert(models.Model):
    """An alert sent to operators; one per incident, not one per tick."""

    kind = models.CharField(max_length=32, choices=AlertKind.choices)
    incident_key = models.CharField(max_length=200, unique=True)
    schedule = models.ForeignKey(
        "scheduler.Schedule", null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts"
    )
    run = models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    message = MaskedTextField()
    channels = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=AlertStatus.choices, default=AlertStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    error = MaskedTextField(blank=True)
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
    """Final runs counted per schedule and UTC hour, a column per final status: the timeline's crowded ranges read
    these instead of the ledger (issue 25; services/hour_counts.py).

    A row whose `end_hour` is its `hour` counts the runs that started in that hour (were queued in it, if they never
    started); a row whose `end_hour` is later counts again those of them that ended in that later hour, the only
    rows a range reads from before its first hour (their partial index). Like RunTally, each run's end inserts its
    rows (`folded` false) in its own transaction and governance folds them into one row per key (`folded` true,
    unique); a prune inserts the runs it deletes with negative counts, so an hour's counts always equal the
    ledger's runs of that hour.
    """

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="+", db_index=False)
    hour = models.DateTimeField(help_text="The UTC hour the runs started in (were queued in, if they never started).")
    end_hour = models.DateTimeField(help_text="The hour itself: every run that started in it; a later hour: those of "
                                              "them that ended in that hour.")
    succeeded = models.IntegerField(default=0, help_text="Runs that SUCCEEDED (negative: pruned, not folded yet).")
    failed = models.IntegerField(default=0, help_text="Runs that FAILED.")
    skipped = models.IntegerField(default=0, help_text="Runs that were SKIPPED.")
    blocked = models.IntegerField(default=0, help_text="Runs that were BLOCKED.")
    cancelled = models.IntegerField(default=0, help_text="Runs that were CANCELLED.")
    folded = models.BooleanField(default=False, help_text="One row per key, summed by governance.")

    #: the column that counts each final status
    COLUMNS = {RunStatus.SUCCEEDED: "succeeded", RunStatus.FAILED: "failed", RunStatus.SKIPPED: "skipped",
               RunStatus.BLOCKED: "blocked", RunStatus.CANCELLED: "cancelled"}

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["schedule", "hour", "end_hour"], condition=models.Q(folded=True),
                                    name="runhour_folded_key"),
        ]
        indexes = [
            # a range's hours, every schedule: the rows of the runs that started in them
            models.Index(fields=["hour"], condition=models.Q(end_hour=models.F("hour")), name="runhour_hour_idx"),
            models.Index(fields=["schedule", "hour"], name="runhour_sched_hour_idx"),  # a few schedules; the FK
            # runs that started before a range and ended in it: a few rows whatever the range's distance back
            models.Index(fields=["end_hour"], condition=models.Q(end_hour__gt=models.F("hour")),
                         name="runhour_reaching_idx"),
            models.Index(fields=["id"], condition=models.Q(folded=False), name="runhour_unfolded_idx"),  # the fold
        ]

    def __str__(self) -> str:
        return f"runs of schedule {self.schedule_id} from {self.hour:%Y-%m-%d %H}h to {self.end_hour:%H}h"
