from django.core.validators import MinValueValidator
from django.db import models


# the classes every installation starts with (migration 0002 made them; `init_production` makes any missing):
# (name, concurrency limit, description)
DEFAULT_CLASSES = [("standard", 4, "Everyday syncs"), ("heavy", 1, "Large loads, one at a time"),
                   ("critical", 2, "Must-run jobs")]


class WorkloadClass(models.Model):
    """A named lane of the queue with its own concurrency limit."""

    name = models.SlugField(max_length=64, unique=True, help_text="Lane name, e.g. standard, heavy, critical.")
    concurrency_limit = models.PositiveIntegerField(
        default=4,
        validators=[MinValueValidator(1)],
        help_text="Most RUNNING runs of this class at once, across all clusters.",
    )
    description = models.CharField(max_length=200, blank=True, help_text="What belongs in this lane.")

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "workload classes"

    def __str__(self) -> str:
        return self.name
