"""Database leases: exactly one holder of each loop across all clusters."""
from __future__ import annotations

from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q

from scheduler.models import LoopLease


def lease_acquire(*, name: str, holder: str, ttl: float, now: datetime) -> bool:
    """Take or renew the lease; True when `holder` holds it until now + ttl."""
    if not LoopLease.objects.filter(name=name).exists():
        try:
            with transaction.atomic():
                LoopLease.objects.create(name=name)
        except IntegrityError:
            pass  # another cluster created it first
    expires = now + timedelta(seconds=ttl)
    renewed = LoopLease.objects.filter(name=name, holder=holder).update(renewed_at=now, expires_at=expires)
    if renewed:
        return True
    # compare-and-set: only a free or expired lease changes hands
    taken = (
        LoopLease.objects.filter(name=name)
        .filter(Q(holder="") | Q(expires_at__isnull=True) | Q(expires_at__lt=now))
        .update(holder=holder, acquired_at=now, renewed_at=now, expires_at=expires)
    )
    return bool(taken)


def lease_release(*, name: str, holder: str) -> bool:
    return bool(LoopLease.objects.filter(name=name, holder=holder).update(holder="", expires_at=None))
