from django.db import models

from scheduler.models.fields import MaskedJSONField, MaskedTextField


class LineageStatus(models.TextChoices):
    """Where an outbox row stands: waiting to be sent, sent, or given up after ETL_LINEAGE_MAX_ATTEMPTS."""

    PENDING = "PENDING", "Pending"
    SENT = "SENT", "Sent"
    DEAD = "DEAD", "Given up"


class LineageEvent(models.Model):
    """One OpenLineage run event in the durable outbox (docs/lineage.md).

    Written in the transaction of the run's state change it reports; the cluster's `lineage` loop sends the
    pending rows, oldest first and in order per run, and prunes sent rows after ETL_LINEAGE_RETENTION_HOURS.
    """

    run = models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                            help_text="The run the event reports (kept empty once the run is pruned).")
    run_uuid = models.CharField(max_length=36, help_text="The OpenLineage runId: events of one runId go in order.")
    event_type = models.CharField(max_length=16, help_text="START, RUNNING, COMPLETE, FAIL or ABORT.")
    job_name = models.CharField(max_length=400, help_text="The OpenLineage job: the schedule (or schedule.node).")
    payload = MaskedJSONField(help_text="The OpenLineage RunEvent, as sent.")
    created_at = models.DateTimeField(help_text="When the state change it reports was written.")
    status = models.CharField(max_length=8, choices=LineageStatus.choices, default=LineageStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0, help_text="Tries to send it so far.")
    next_attempt_at = models.DateTimeField(help_text="Not tried again before this time (exponential back-off).")
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = MaskedTextField(blank=True, help_text="Why the last try failed.")

    class Meta:
        ordering = ["id"]
        indexes = [
            # the sender reads pending rows oldest first; the metric counts them
            models.Index(fields=["status", "id"], name="lineage_status_idx"),
            models.Index(fields=["status", "sent_at"], name="lineage_sent_idx"),
            models.Index(fields=["run_uuid", "id"], name="lineage_run_uuid_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} of {self.job_name} ({self.status})"
