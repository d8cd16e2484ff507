from django.db import models

from scheduler.models.choices import WatermarkChange


class WatermarkState(models.Model):
    """The high-water mark a schedule has loaded up to."""

    schedule = models.OneToOneField(
        "scheduler.Schedule", on_delete=models.CASCADE, related_name="watermark", primary_key=True
    )
    value = models.CharField(max_length=64, blank=True, help_text="ISO datetime or integer; empty = not loaded yet.")
    updated_at = models.DateTimeField(null=True, blank=True)
    updated_by_run = models.ForeignKey(
        "scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    def __str__(self) -> str:
        return f"{self.schedule_id}: {self.value or '(initial)'}"


class WatermarkHistory(models.Model):
    """Every move of a mark: by a run, a reset or a set-to-value."""

    schedule = models.ForeignKey("scheduler.Schedule", on_delete=models.CASCADE, related_name="watermark_history")
    kind = models.CharField(max_length=16, choices=WatermarkChange.choices)
    old_value = models.CharField(max_length=64, blank=True)
    new_value = models.CharField(max_length=64, blank=True)
    run = models.ForeignKey("scheduler.Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.CharField(max_length=150, blank=True)
    reason = models.CharField(max_length=500, blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["schedule", "-at"], name="wm_hist_sched_idx")]
        verbose_name_plural = "watermark history"
