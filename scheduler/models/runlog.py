from django.db import models

from scheduler.models.fields import MaskedTextField


class RunLogLine(models.Model):
    """One captured log line of a run: the pipeline's `logging` output and the scheduler's own notes."""

    run = models.ForeignKey("scheduler.Run", on_delete=models.CASCADE, related_name="log_lines")
    seq = models.PositiveIntegerField(help_text="Order within the run, from 1.")
    at = models.DateTimeField(help_text="When the line was logged.")
    level = models.CharField(max_length=8, help_text="INFO, WARNING, ERROR ...")
    source = models.CharField(max_length=100, help_text="Logger name, or 'scheduler' for the scheduler's notes.")
    message = MaskedTextField(help_text="The line, with its traceback when it carried one.")
    node = models.CharField(max_length=200, blank=True, default="",
                            help_text="The workflow node (or dbt node) the line came from; empty: the run itself.")

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="runlog_unique_seq")]

    def __str__(self) -> str:
        return f"run {self.run_id} #{self.seq} {self.level} {self.message[:60]}"
