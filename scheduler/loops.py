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
from typing import Callable

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from scheduler.services.oversight.alerts import alerts_shutdown, alerts_tick
from scheduler.services.admission.dispatch import dispatch_tick
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
    def __init__(self, name: str, interval: float, tick: Callable[..., object], holder: str,
                 lease_seconds: float | None = None) -> None:
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
            try:
                close_old_connections()
                if self.has_lease():
                    self.tick(now=timezone.now(), holder=self.holder)
                    self.ticks += 1
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
                self.stop_event.wait(min(30.0, 0.5 * 2 ** min(self.failures, 6)))
                continue
            elapsed = time.monotonic() - started
            self.stop_event.wait(max(0.0, self.interval - elapsed))
        try:
            lease_release(name=self.loop_name, holder=self.holder)
        except Exception:
            log.warning("could not release the %s lease", self.loop_name, exc_info=True)
        finally:
            connection.close()
        log.info("%s loop stopped", self.loop_name)

    def stop(self) -> None:
        self.stop_event.set()


REAPER_INTERVAL = 0.5


def reaper_tick(*, now, holder: str) -> list[int]:
    """This machine's runs whose worker process died: their commands' leftovers killed, a stopping run's end written."""
    return stopped_runs_of_dead_workers(now=now, host=socket.gethostname(), alive=pid_alive, kill=kill_run_processes)


def start_loops(cluster: str | None = None) -> list[LeasedLoop]:
    holder = holder_id(cluster)
    loops = [
        LeasedLoop("dispatch", settings.ETL_DISPATCH_INTERVAL, dispatch_tick, holder),
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
