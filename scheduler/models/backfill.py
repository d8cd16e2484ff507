from django.db import models

from scheduler.models.choices import BackfillStatus, WindowStatus
from scheduler.timefmt import interval_text, span_words


class Backfill(models.Model):
    """A request to reprocess a historical range, split into windows up front."""

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="backfills")
    range_from = models.CharField(
        max_length=64, help_text="Start of the range: included for datetime marks, excluded for integer marks."
    )
    range_to = models.CharField(
        max_length=64, help_text="End of the range: excluded for datetime marks, included for integer marks."
    )
    window_size = models.CharField(max_length=32, help_text="Seconds (datetime marks) or a count (integer marks).")
    reason = models.CharField(max_length=500)
    requested_by = models.CharField(max_length=150)
    max_parallel = models.PositiveIntegerField(default=1)
    newest_first = models.BooleanField(
        default=False, help_text="Queue the windows newest first (the latest data back soonest); default oldest first."
    )
    params = models.JSONField(
        default=dict, blank=True, help_text="Params given to every window's run (e.g. a different target table)."
    )
    status = models.CharField(max_length=16, choices=BackfillStatus.choices, default=BackfillStatus.ACTIVE)
    total_windows = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status"], name="backfill_status_idx")]
        permissions = [("manage_backfill", "Can submit, pause, resume, cancel and retry backfills")]

    def __str__(self) -> str:
        return f"backfill {self.pk} of {self.schedule_id}"

    @property
    def range_text(self) -> str:
        return interval_text(self.range_from, self.range_to)

    @property
    def window_words(self) -> str:
        """The window size as a person reads it: '1 day', '6 hours' (datetime marks), '500 values' (integers)."""
        if "T" in self.range_from or "T" in self.range_to:
            return span_words(self.window_size)
        return f"{self.window_size} values"


class BackfillWindow(models.Model):
    """One window of a backfill; its latest run carries the execution."""

    backfill = models.ForeignKey(Backfill, on_delete=models.CASCADE, related_name="windows")
    seq = models.PositiveIntegerField(help_text="0-based, oldest first.")
    low = models.CharField(max_length=64)
    high = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=WindowStatus.choices, default=WindowStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    run = models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["backfill", "seq"]
        constraints = [models.UniqueConstraint(fields=["backfill", "seq"], name="bf_window_unique_seq")]
        indexes = [models.Index(fields=["backfill", "status", "seq"], name="bf_window_status_idx")]

    @property
    def text(self) -> str:
        return interval_text(self.low, self.high)
