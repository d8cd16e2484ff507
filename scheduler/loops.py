"""Supervised dispatch, governance, alerts, lineage and prune loops, each guarded by a database lease.

They run as threads inside `manage.py qcluster` (started after django-q2's
Sentinel has forked, so no lock is inherited by a child). Every cluster runs
both threads; the lease lets exactly one of each do work at a time, and
another cluster takes over within the lease time when the holder dies.
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from datetime import datetime
from typing import Callable

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from scheduler.services.oversight.alerts import alerts_shutdown, alerts_tick
from scheduler.services.admission.dispatch import dispatch_tick
from scheduler.services.admission.wakeup import RunQueuedListener, backend_pid
from scheduler.services.integrations.lineage_send import lineage_tick
from scheduler.services.cluster.governance import governance_tick, stopped_runs_of_dead_workers
from scheduler.services.history.prune import prune_tick
from scheduler.services.worker.supervisor import kill_run_processes, pid_alive
from scheduler.services.common.leases import lease_acquire, lease_release

log = logging.getLogger(__name__)


def holder_id(cluster: str | None = None) -> str:
    name = cluster or os.environ.get("ETL_CLUSTER_ID") or settings.Q_CLUSTER.get("name", "etl")
    return f"{name}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class LeasedLoop(threading.Thread):
    """A loop that ticks every `interval` s while it holds its lease.

    A tick that returns {"next_fire_at": an aware datetime} (the dispatch tick: a fire due before the next poll)
    has the next tick then. `wake` (the dispatch loop's, scheduler/services/admission/wakeup.py): built with the
    loop's stop event, it lets the lease holder tick as soon as a run is queued, not at the next poll; see `pause`.
    """

    def __init__(self, name: str, interval: float, tick: Callable[..., object], holder: str,
                 lease_seconds: float | None = None,
                 wake: Callable[[threading.Event], RunQueuedListener] | None = None) -> None:
        super().__init__(name=f"etl-{name}-loop", daemon=True)
        self.loop_name = name
        self.interval = interval
        self.tick = tick
        self.holder = holder
        self.lease_seconds = lease_seconds or settings.ETL_LEASE_SECONDS
        self.stop_event = threading.Event()
        self.lease_until = 0.0  # monotonic time up to which we trust our lease
        self.ticks = 0
        self.failures = 0
        self.waiter = wake(self.stop_event) if wake is not None else None

    def has_lease(self) -> bool:
        now_mono = time.monotonic()
        # renew at half-life: one write per lease period, not one per tick
        if now_mono < self.lease_until - self.lease_seconds / 2:
            return True
        if lease_acquire(name=self.loop_name, holder=self.holder, ttl=self.lease_seconds, now=timezone.now()):
            self.lease_until = now_mono + self.lease_seconds
            return True
        self.lease_until = 0.0
        return False

    def run(self) -> None:
        log.info("%s loop started as %s", self.loop_name, self.holder)
        while not self.stop_event.is_set():
            started = time.monotonic()
            held = False
            try:
                close_old_connections()
                held = self.has_lease()
                if self.waiter is not None and held:
                    self.waiter.listen()  # before the tick's reads: a run queued after them wakes the pause
                elif self.waiter is not None:
                    self.waiter.close()  # only the holder listens; the others ask for the lease at their own pace
                soon = None
                if held:
                    done = self.tick(now=timezone.now(), holder=self.holder)
                    self.ticks += 1
                    soon = done.get("next_fire_at") if isinstance(done, dict) else None
                self.failures = 0
            except Exception:
                # Supervised: a failed tick (database restart, ...) is logged once
                # per failure streak step and retried with a capped backoff.
                self.failures += 1
                log.exception("%s tick failed (%d in a row)", self.loop_name, self.failures)
                try:
                    connection.close()
                except Exception:
                    pass
                self.lease_until = 0.0
                if self.waiter is not None:
                    self.waiter.close()
                self.stop_event.wait(min(30.0, 0.5 * 2 ** min(self.failures, 6)))
                continue
            self.pause(started, listening=held and self.waiter is not None, until=soon)
        if self.waiter is not None:
            self.waiter.close()
        try:
            lease_release(name=self.loop_name, holder=self.holder)
        except Exception:
            log.warning("could not release the %s lease", self.loop_name, exc_info=True)
        finally:
            connection.close()
        log.info("%s loop stopped", self.loop_name)

    def pause(self, started: float, *, listening: bool, until: datetime | None = None) -> None:
        """Wait out the interval begun at `started` (monotonic), or until `until`, when the tick said a fire is due
        before the next poll. A woken loop first keeps still as long as its tick took (`quiet_for`), so a stream of
        wakes cannot keep it ticking more than half the time; then a listening lease holder waits on its listener,
        which a queued run wakes at once (a burst: once)."""
        now_mono = time.monotonic()
        end = started + self.interval
        if until is not None:
            end = min(end, now_mono + max(0.0, (until - timezone.now()).total_seconds()) + FIRE_LATE)
        quiet = quiet_for(elapsed=now_mono - started, interval=self.interval)
        if quiet > 0 and self.stop_event.wait(quiet):
            return
        if listening:
            self.waiter.wait(end - time.monotonic(), own_pid=backend_pid(connection))
        else:
            self.stop_event.wait(max(0.0, end - time.monotonic()))

    def stop(self) -> None:
        self.stop_event.set()


FIRE_LATE = 0.001  # a loop woken for a fire ticks this long after it, so the tick's `now` finds the fire due


def quiet_for(*, elapsed: float, interval: float) -> float:
    """How long a woken loop keeps still after a tick of `elapsed` s: as long as the tick, within the interval."""
    return max(0.0, min(elapsed, interval - elapsed))


REAPER_INTERVAL = 0.5


def reaper_tick(*, now, holder: str) -> list[int]:
    """This machine's runs whose worker process died: their commands' leftovers killed, a stopping run's end written."""
    return stopped_runs_of_dead_workers(now=now, host=socket.gethostname(), alive=pid_alive, kill=kill_run_processes)


def start_loops(cluster: str | None = None) -> list[LeasedLoop]:
    holder = holder_id(cluster)
    loops = [
        # PostgreSQL: woken by a queued run between polls (ETL_DISPATCH_WAKE; scheduler/services/admission/wakeup.py)
        LeasedLoop("dispatch", settings.ETL_DISPATCH_INTERVAL, dispatch_tick, holder,
                   wake=RunQueuedListener if settings.ETL_DISPATCH_WAKE else None),
        LeasedLoop("governance", settings.ETL_GOVERNANCE_INTERVAL, governance_tick, holder),
        # alerts wait in their table, not behind pipelines in the worker queue: a small pool of their own sends them
        LeasedLoop("alerts", settings.ETL_ALERT_INTERVAL, alerts_tick, holder),
        # the OpenLineage outbox: one sender across the clusters keeps each run's events in order
        LeasedLoop("lineage", settings.ETL_LINEAGE_INTERVAL, lineage_tick, holder),
        # retention: a few short batches of each kind a tick, never one long delete (services/retention.py)
        LeasedLoop("prune", settings.ETL_PRUNE_INTERVAL, prune_tick, holder),
        # one per machine (worker pids mean something only here): the clusters of a machine share its lease
        LeasedLoop(f"reaper@{socket.gethostname()}"[:64], REAPER_INTERVAL, reaper_tick, holder),
    ]
    for loop in loops:
        loop.start()
    return loops


def stop_loops(loops: list[LeasedLoop], timeout: float = 10.0) -> None:
    for loop in loops:
        loop.stop()
    for loop in loops:
        loop.join(timeout)
    alerts_shutdown()
