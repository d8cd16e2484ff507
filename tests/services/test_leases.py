"""Database leases: one holder at a time; an expired lease changes hands."""
from datetime import timedelta

import pytest

from scheduler.loops import LeasedLoop
from scheduler.models import LoopLease
from scheduler.services.common.leases import lease_acquire, lease_release

pytestmark = pytest.mark.django_db


def test_only_one_holder_gets_a_live_lease(now):
    assert lease_acquire(name="dispatch", holder="a", ttl=10, now=now)
    assert not lease_acquire(name="dispatch", holder="b", ttl=10, now=now + timedelta(seconds=5))
    assert LoopLease.objects.get(name="dispatch").holder == "a"


def test_the_holder_renews_and_keeps_it(now):
    lease_acquire(name="dispatch", holder="a", ttl=10, now=now)
    assert lease_acquire(name="dispatch", holder="a", ttl=10, now=now + timedelta(seconds=8))
    assert not lease_acquire(name="dispatch", holder="b", ttl=10, now=now + timedelta(seconds=15))
    assert LoopLease.objects.get(name="dispatch").expires_at == now + timedelta(seconds=18)


def test_another_holder_takes_over_when_the_lease_expires(now):
    lease_acquire(name="governance", holder="dead", ttl=10, now=now)
    assert lease_acquire(name="governance", holder="b", ttl=10, now=now + timedelta(seconds=10, microseconds=1))
    lease = LoopLease.objects.get(name="governance")
    assert lease.holder == "b" and lease.acquired_at == now + timedelta(seconds=10, microseconds=1)


def test_a_released_lease_is_free_at_once(now):
    lease_acquire(name="dispatch", holder="a", ttl=60, now=now)
    assert lease_release(name="dispatch", holder="a")
    assert not lease_release(name="dispatch", holder="a")
    assert lease_acquire(name="dispatch", holder="b", ttl=60, now=now + timedelta(seconds=1))


def test_two_loops_on_one_lease_only_one_ticks():
    ticks = []
    first = LeasedLoop("dispatch", 1.0, lambda **kw: ticks.append(kw["holder"]), holder="one", lease_seconds=30)
    second = LeasedLoop("dispatch", 1.0, lambda **kw: ticks.append(kw["holder"]), holder="two", lease_seconds=30)
    assert first.has_lease() is True
    assert second.has_lease() is False
    # within half the lease the holder trusts it without a write
    assert first.has_lease() is True
    assert LoopLease.objects.get(name="dispatch").holder == "one"
