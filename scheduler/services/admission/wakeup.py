"""Waking the dispatch loop when a run is queued, instead of at its next poll (PostgreSQL LISTEN/NOTIFY).

On PostgreSQL two triggers on the run table (migration 0034) send NOTIFY etl_run_queued from every transaction that
inserts a QUEUED run or moves one back to QUEUED, with no statement of their own; PostgreSQL delivers it at commit,
once per transaction. The dispatch loop, while it holds its lease, LISTENs on a connection of its own and waits on
it between ticks, with the rest of its poll interval as the timeout. The poll stays: a notification lost (the
listener reconnecting, a database restart) costs at most one interval, as before.

A burst coalesces: a wait that wakes takes every notification already arrived with it, so the notifications that
came during a tick start one more tick, not one each. Notifications sent by the dispatch loop's own connection (its
fires, backfill pumps and releases, which the same tick admits) wake nothing.

SQLite has no NOTIFY, and the web and the cluster are separate processes: there the loop polls (`wait` sleeps).
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper

log = logging.getLogger(__name__)

CHANNEL = "etl_run_queued"  # the triggers of migration 0034 notify this channel
SLICE = 0.25  # the longest one wait blocks without looking at the loop's stop event
RECONNECT_FIRST, RECONNECT_MOST = 1.0, 30.0  # seconds between attempts to listen again after a failure, doubling


def backend_pid(wrapper: BaseDatabaseWrapper) -> int | None:
    """The server process of a Django connection (PostgreSQL), None when it is not open."""
    raw = getattr(wrapper, "connection", None)
    try:
        return raw.info.backend_pid if raw is not None and not raw.closed else None
    except AttributeError:
        return None


class RunQueuedListener:
    """The dispatch loop's wake-up: `wait(timeout)` returns True at once when a run was queued, False at the timeout.

    Use it from one thread (the loop's). Any database error closes its connection and is logged; the loop then
    polls, and the listener tries again after a back-off (1 s, doubling to 30 s). It never raises.
    """

    def __init__(self, stop: threading.Event, *, alias: str = DEFAULT_DB_ALIAS) -> None:
        self.stop = stop
        self.alias = alias
        self.enabled = connections[alias].vendor == "postgresql"
        self._db: BaseDatabaseWrapper | None = None
        self._retry_at = 0.0
        self._failures = 0
        self.wakes = 0  # waits that a notification ended (for tests and the log)

    @property
    def listening(self) -> bool:
        return self._db is not None

    def listen(self) -> bool:
        """LISTEN, unless already listening; False when it cannot now (SQLite, after a failure): the poll serves.

        The loop calls this before a tick's reads, so a run committed after them wakes the wait that follows."""
        if self._db is not None:
            return True
        if not self.enabled or time.monotonic() < self._retry_at:
            return False
        base = connections[self.alias]
        db = type(base)(base.settings_dict, self.alias)  # a connection of its own, never the thread's
        try:
            db.ensure_connection()
            db.set_autocommit(True)
            db.connection.execute(f"LISTEN {CHANNEL}")
        except Exception:
            self._failed(db, "could not listen for queued runs")
            return False
        self._db = db
        if self._failures:
            log.info("listening for queued runs again after %d failure(s)", self._failures)
        self._failures = 0
        return True

    def wait(self, timeout: float, *, own_pid: int | None = None) -> bool:
        """Wait up to `timeout` s for a run queued by another connection than `own_pid`; True when one was.

        Whatever else had arrived is taken with it. Returns early, False, when the stop event is set."""
        deadline = time.monotonic() + max(0.0, timeout)
        if self.stop.is_set():
            return False
        if not self.listen():
            self.stop.wait(max(0.0, deadline - time.monotonic()))
            return False
        raw = self._db.connection
        try:
            while True:
                got = list(raw.notifies(timeout=max(0.0, min(deadline - time.monotonic(), SLICE)), stop_after=1))
                if any(notice.pid != own_pid for notice in got):
                    for _notice in raw.notifies(timeout=0):
                        pass  # the rest of a burst: one tick serves them all
                    self.wakes += 1
                    return True
                if self.stop.is_set() or time.monotonic() >= deadline:
                    return False
        except Exception:
            self._failed(self._db, "lost the connection listening for queued runs")
            self._db = None
            self.stop.wait(max(0.0, deadline - time.monotonic()))
            return False

    def close(self) -> None:
        """Stop listening (the lease lost, the loop stopping); a later `listen` opens a new connection."""
        db, self._db = self._db, None
        if db is not None:
            try:
                db.close()
            except Exception:
                pass

    def _failed(self, db: BaseDatabaseWrapper, what: str) -> None:
        self._failures += 1
        delay = min(RECONNECT_MOST, RECONNECT_FIRST * 2 ** min(self._failures - 1, 5))
        self._retry_at = time.monotonic() + delay
        log.warning(
            "%s (%d in a row); polling, next try in %g s", what, self._failures, delay, exc_info=self._failures == 1
        )
        try:
            db.close()
        except Exception:
            pass
