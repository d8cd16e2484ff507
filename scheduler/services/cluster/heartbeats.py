"""A worker's heartbeat pump: one thread per worker process beats for every run it executes, and carries stop
requests between the database and the supervisor."""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from scheduler.core.timing import STOP_POLL_SECONDS
from scheduler.models import Run, RunStatus, StopKind
from scheduler.services.common.singleton import PerProcessThread
from scheduler.services.worker import supervisor
from scheduler.services.runs.stop import run_stop_request
from scheduler.services.runs.logs import save_pending

log = logging.getLogger(__name__)
S = RunStatus


def worker_name(pid: int | None = None) -> str:
    """A run's `worker_id`: this worker process's (or, in the cluster's main process, its worker `pid`'s)."""
    return f"{os.environ.get('ETL_CLUSTER_ID', 'etl')}@{socket.gethostname()}:{pid or os.getpid()}"


class HeartbeatPump(PerProcessThread):
    """One daemon thread per worker process touches the heartbeat of every run it executes.

    One long-lived thread (with its own connection) instead of one per run:
    starting and joining a thread per run cost more than the run itself for
    short pipelines.
    """

    def __init__(self, interval: float) -> None:
        super().__init__(name="etl-heartbeat")
        self.interval = interval
        self.active: dict[int, str] = {}
        self.wake = threading.Event()

    @classmethod
    def make(cls) -> "HeartbeatPump":
        return cls(settings.ETL_HEARTBEAT_SECONDS)

    def register(self, run_id: int, token: str) -> None:
        self.active[run_id] = token

    def unregister(self, run_id: int) -> None:
        self.active.pop(run_id, None)

    def run(self) -> None:
        # Between two beats the pump only reads its runs' stop requests, every STOP_POLL_SECONDS: a cancel then
        # reaches the code about a second after it is asked, not up to a whole heartbeat interval later (5 s
        # by default, which put a forced stop at up to interval + grace; bench scenario 9).
        poll = min(self.interval, STOP_POLL_SECONDS)
        next_beat = time.monotonic() + self.interval
        while not self.wake.wait(poll):
            due = time.monotonic() >= next_beat - poll / 2  # half a poll early rather than a whole poll late
            if due:
                next_beat = time.monotonic() + self.interval
            if not self.active:
                if due:
                    # idle at a beat: hand the connection back rather than hold a session open between runs (at
                    # the beat's pace, not the poll's: a worker running short runs would reconnect every poll)
                    connection.close()
                continue
            try:
                if due:
                    close_old_connections()
                    self.beat(timezone.now())
                else:
                    self.stops(timezone.now())
            except Exception:  # a database blip must not kill the pump; governance judges silence
                if due:
                    log.warning("heartbeat update failed", exc_info=True)
                else:  # the next beat says it, once per interval
                    log.debug("reading stop requests failed", exc_info=True)
                connection.close()

    def beat(self, now: datetime) -> int:
        """One statement for every run this process holds (a batch beats once); returns the runs touched.

        The same beat reads the stop requests of those runs (a cancel) and writes the ones the supervisor found
        itself (a timeout), as `stops` does between beats.
        """
        beating = dict(self.active)
        if not beating:
            return 0
        began = time.monotonic()
        touched = Run.objects.filter(pairs_q(beating.items()), status=S.RUNNING).update(heartbeat_at=now)
        watchdog = supervisor.Supervisor.get()
        if touched == len(beating):
            watchdog.beat_ok(began, beating)
        else:
            # a beat proves contact only for the runs it touched: a run whose row it missed was given away (or
            # ended) meanwhile, and its code stops at once (one read, only when the beat missed some)
            ours = set(Run.objects.filter(pairs_q(beating.items()), status=S.RUNNING).values_list("pk", flat=True))
            if ours:
                watchdog.beat_ok(began, ours)
            watchdog.contact_lost([run_id for run_id in beating if run_id not in ours],
                                  "fenced: its heartbeat touched nothing (the run is no longer this worker's)")
        self._stop_requests(beating, now)
        save_pending()  # the run page follows a running run's log at this pace
        return touched

    def stops(self, now: datetime) -> None:
        """Between beats: the stop requests of the runs this process holds (one read by primary key) to their
        code, and the supervisor's own (a timeout) to the database. Not a heartbeat: silence is still judged on
        the beats alone."""
        beating = dict(self.active)
        if beating:
            self._stop_requests(beating, now)

    def _stop_requests(self, beating: dict[int, str], now: datetime) -> None:
        watchdog = supervisor.Supervisor.get()
        for run_id, kind, reason in (Run.objects.filter(pairs_q(beating.items()), stop_requested_at__isnull=False)
                                     .values_list("pk", "stop_kind", "stop_reason")):
            watchdog.request(run_id, kind, reason)
        for control in watchdog.active():
            record_local_stop(control, now=now)  # shown as STOPPING (timed out) while the code winds down


def record_local_stop(control: supervisor.RunControl, *, now: datetime) -> None:
    """A timeout the supervisor found itself (not read from the database) is written as the run's stop request.

    The heartbeat pump does it each beat, and the last words before the supervisor ends a worker process: with a
    short grace the process may end before the next beat, and the reaper settles only runs whose stop request is
    in the database (else governance would call the run lost, ETL_STUCK_SECONDS later, and re-queue it).
    """
    request = control.requested
    if request is None or control.recorded or request.kind != StopKind.TIMEOUT:
        return
    stopping = Run.objects.select_related("schedule").filter(pk=control.run_id).first()
    if stopping is not None:
        # compare-and-set: a second writer (the pump and the last words at once) changes nothing
        run_stop_request(run=stopping, kind=request.kind, reason=request.reason, now=now, actor="worker")
    control.recorded = True  # after the write: a beat whose write failed tries again at the next one


def pairs_q(pairs) -> Q:
    """Runs matching (id, dispatch token) pairs: a message's runs, and only while its token is theirs.

    Two IN lists instead of one (id AND token) term per pair: a token is
    unique to its run (a uuid, or the admitting tick's uuid and the run's id),
    so a run whose token is in the list holds its own token. The id list also
    lets the planner read the rows by id, not every RUNNING row by status.
    """
    pairs = list(pairs)
    return Q(pk__in=[run_id for run_id, _ in pairs], dispatch_token__in=[token for _, token in pairs])


__all__ = ["STOP_POLL_SECONDS", "HeartbeatPump", "pairs_q", "record_local_stop", "worker_name"]
