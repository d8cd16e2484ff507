from django.db import models

from scheduler.models.choices import NodeOutcome
from scheduler.models.fields import MaskedCharField, MaskedTextField


class NodeRecord(models.Model):
    """One node of a workflow run, written as the node finishes (a row per node and run attempt).

    What lets a re-queued or re-run workflow skip the nodes that already
    succeeded for it, and shows each node's tries while the run goes on.
    """

    run = models.ForeignKey("scheduler.Run", on_delete=models.CASCADE, related_name="nodes")
    run_attempt = models.PositiveIntegerField(default=1, help_text="The run's attempt that ran (or resumed) the node.")
    task_id = models.CharField(max_length=200, help_text="The node's id in the workflow.")
    outcome = models.CharField(max_length=16, choices=NodeOutcome.choices)
    attempts = models.PositiveIntegerField(default=1, help_text="Tries under the node's retry policy.")
    resumed = models.BooleanField(
        default=False, help_text="Succeeded in an earlier attempt (or the run re-run from failure); not run again."
    )
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    rows = models.BigIntegerField(default=0)
    watermark = models.CharField(max_length=64, blank=True, help_text="Largest watermark value the node loaded.")
    reason = MaskedCharField(max_length=500, blank=True, help_text="Why it failed.")
    error = MaskedTextField(blank=True, default="", help_text="A failed node's traceback (its last 8,000 characters).")

    class Meta:
        ordering = ["run", "id"]
        indexes = [
            models.Index(fields=["run", "outcome"], name="node_run_outcome_idx"),
            # a node's freshness: its latest success across the schedule's runs
            models.Index(fields=["task_id", "outcome", "-finished_at"], name="node_task_success_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} of run {self.run_id}: {self.outcome}"
