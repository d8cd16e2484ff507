from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from scheduler.models import Run, RunStatus, requeue_fields


def release_unstarted(*, holder_prefix: list[str]) -> int:
    """After a clean stop: runs this cluster admitted that no worker started go back to the queue."""
    if not holder_prefix:
        return 0
    released = 0
    with transaction.atomic():
        for holder in holder_prefix:
            released += Run.objects.filter(
                status=RunStatus.RUNNING, started_at__isnull=True, worker_id=holder
            ).update(**requeue_fields(
                reason=f"cluster stopped before a worker started it ({timezone.now():%H:%M:%S} UTC)"))
    return released
