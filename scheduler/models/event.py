from django.db import models


class Event(models.Model):
    """An event received on a topic; matching event schedules get one run each."""

    topic = models.CharField(max_length=200, db_index=True)
    event_id = models.CharField(max_length=200, help_text="Sender's id, used to deduplicate.")
    payload = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=150, blank=True, help_text="http, command, api ... and who.")
    received_at = models.DateTimeField()
    matched = models.PositiveIntegerField(default=0, help_text="Runs created for it.")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["topic", "event_id"], name="event_unique_id")]

    def __str__(self) -> str:
        return f"{self.topic}#{self.event_id}"


class WebhookDelivery(models.Model):
    """A seen webhook signature, kept for the replay window to refuse replays."""

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="+")
    signature = models.CharField(max_length=128)
    received_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["schedule", "signature"], name="webhook_unique_signature")]
