"""What a person moving a watermark needs beside the field (issue 37): the current mark, typed in their zone ready
to edit, where the next window starts (`overlap` before the mark) and when the next run reads it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from scheduler.core import ConfigError
from scheduler.models import Schedule
from scheduler.services.runs.watermarks import effective_mark, watermark_config


def watermark_hints(schedule: Schedule, stored: str | None) -> dict:
    """{"prefill": the mark as the form's field takes it (a datetime in the viewer's zone, to the second),
    "mark", "reads_from": the mark less the overlap, "overlap_seconds" or "overlap" (integer marks),
    "next_fire": when the schedule next fires on its own (None: paused or no timed trigger)}; {} without a mark."""
    try:
        config = watermark_config(schedule)
        mark = effective_mark(config, stored or "") if config else None
    except (ConfigError, ValueError):  # a mark the page cannot read is shown as stored, without hints
        return {}
    if config is None:
        return {}
    hints = {"mark": mark, "next_fire": schedule.next_fire_at if schedule.enabled else None,
             "enabled": schedule.enabled, "is_datetime": config.is_datetime}
    if config.is_datetime:
        overlap = config.overlap if isinstance(config.overlap, timedelta) else timedelta(0)
        hints["overlap_seconds"] = overlap.total_seconds()
        if isinstance(mark, datetime):
            hints["prefill"] = timezone.localtime(mark).strftime("%Y-%m-%dT%H:%M:%S")
            hints["reads_from"] = mark - overlap
    else:
        hints["overlap"] = config.overlap or 0
        hints["prefill"] = "" if mark is None else str(mark)
        hints["reads_from"] = None if mark is None else mark - hints["overlap"]
    return hints
