from django.conf import settings
from django.db import models


class FailureAck(models.Model):
    """A person saw a schedule's failures up to a run and said why they are handled (the overview's work list).

    A later failure (a run id above `up_to_run_id`) puts the schedule back on the list.
    """

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="failure_acks",
                                 help_text="The schedule whose failures are acknowledged.")
    # an id, not a foreign key: history retention may prune the run, the acknowledgement stays true
    up_to_run_id = models.BigIntegerField(help_text="Failures of the schedule up to this run id are acknowledged.")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+", help_text="Who acknowledged (empty when the user was deleted).")
    actor = models.CharField(max_length=150, help_text="Who acknowledged, as the audit log names them.")
    at = models.DateTimeField(help_text="When.")
    note = models.CharField(max_length=500, help_text="Why the failures are handled (a ticket, a cause, a plan).")

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["schedule", "-up_to_run_id"], name="failureack_schedule_run")]

    def __str__(self) -> str:
        return f"failures of schedule {self.schedule_id} up to run {self.up_to_run_id} acknowledged by {self.actor}"
