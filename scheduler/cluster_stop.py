"""A cluster stops on SIGINT or SIGTERM, and nothing of its process tree outlives it.

`manage.py qcluster` keeps one `ClusterStop`. Its signal handler only notes the signal; the cluster's main loop
then steps through the stop:

1. the loops stop (nothing more is admitted), the runs its loops admitted that no worker began go back to the
   queue, and django-q2's sentinel is told to stop (it takes no more messages);
2. the runs its workers execute get the grace (`--grace`) to end by themselves;
3. those still running are asked to stop as a cancel asks, with the reason "the cluster stopped": the code is
   told, and past ETL_CANCEL_GRACE_SECONDS a command's group is killed, a pipeline's worker process ended. Each
   worker writes its run's end: back to the queue, the attempt not spent (runs/end.py, kind SHUTDOWN);
4. past `core.timing.shutdown_bound`, whatever is left of the tree (the sentinel, a worker, a command and its
   children) is killed, and the ends no worker wrote are written here. django-q2's own stop can hang (its
   issue #346): it is never waited for longer than that.

The sentinel runs in a process group of its own and dies with the main process (`OwnGroupCluster`), so a signal to
the cluster's group reaches only the main process (django-q2's sentinel and workers die at once on SIGTERM, which
would leave their runs RUNNING for governance to call lost), and a main process killed outright takes its whole
tree with it.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from multiprocessing import current_process

from django.conf import settings
from django_q.cluster import Cluster, Sentinel, get_mp_context
from django_q.conf import setproctitle

from scheduler.core.timing import shutdown_bound
from scheduler.loops import stop_loops
from scheduler.services.cluster.heartbeats import worker_name
from scheduler.services.cluster.shutdown import (
    release_unstarted,
    runs_of_workers,
    runs_requeue_after_shutdown,
    runs_stop_for_shutdown,
)
from scheduler.services.worker.processes import (
    descendants,
    kill_run_processes,
    kill_tree,
    own_group_dying_with_parent,
    reap_orphans,
)

log = logging.getLogger("scheduler.cluster")
STOP_TICK = 0.2  # the main loop's look while it stops: the precision of the grace and of the kill


def _sentinel(parent: int, *args) -> None:
    own_group_dying_with_parent(parent)
    Sentinel(*args)


class OwnGroupCluster(Cluster):
    """django-q2's `Cluster`, its sentinel started in a process group of its own that dies with this process."""

    def __init__(self) -> None:
        # no call to Cluster.__init__: it installs django-q2's signal handlers, whose stop blocks in the handler
        self.broker = None
        self.sentinel = None
        self.stop_event = None
        self.start_event = None
        self.pid = current_process().pid
        self.cluster_id = uuid.uuid4()
        self.host = socket.gethostname()
        self.timeout = None

    def start(self) -> int:
        """As django-q2's `Cluster.start`, with `_sentinel` as the sentinel's target."""
        if setproctitle:
            setproctitle.setproctitle(f"qcluster {current_process().name} {self.name}")
        ctx = get_mp_context()
        self.stop_event, self.start_event = ctx.Event(), ctx.Event()
        self.sentinel = ctx.Process(target=_sentinel, name=f"Process-{uuid.uuid4().hex}", args=(
            self.pid, self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout))
        self.sentinel.start()
        log.info("Q Cluster %s starting.", self.name)
        while not self.start_event.is_set():
            if not self.sentinel.is_alive():
                if self.sentinel.exitcode == 0:
                    break
                raise RuntimeError(f"Q Cluster {self.name} failed to start: sentinel exited with code "
                                   f"{self.sentinel.exitcode}")
            time.sleep(0.1)
        return self.pid


class ClusterStop:
    """One cluster's stop, stepped by its main loop (see the module's docstring)."""

    def __init__(self, cluster: OwnGroupCluster, loops: list, *, grace: float,
                 cancel_grace: float | None = None) -> None:
        self.cluster = cluster
        self.loops = loops
        self.grace = grace
        self.cancel_grace = settings.ETL_CANCEL_GRACE_SECONDS if cancel_grace is None else cancel_grace
        self.signal = ""
        self.asked_at: float | None = None  # monotonic: the grace counts from the signal
        self.began: float | None = None
        self.requested: float | None = None
        self.holders: list[str] = []
        self.workers: set[str] = set()

    @property
    def asked(self) -> bool:
        return bool(self.signal)

    def ask(self, signum: int, frame=None) -> None:
        """The signal handler: notes the signal; the main loop does the rest (no database work in a handler)."""
        if not self.signal:
            self.asked_at = time.monotonic()
            self.signal = signal.Signals(signum).name

    def step(self, now: float) -> bool:
        """One look of the main loop while the cluster stops; True once its tree was killed (the bound passed)."""
        if self.began is None:
            self._begin(now)
            return False
        self._note_workers()
        if self.requested is None:
            runs = self._runs()
            if runs is None or (runs and now - self.asked_at < self.grace):
                return False
            if runs:
                log.warning("the grace of %g s is over: asking %d running run(s) to stop (the cluster stopped)",
                            self.grace, len(runs))
                self._quietly(runs_stop_for_shutdown, runs)
            self.requested = now
            return False
        if now - self.asked_at < shutdown_bound(grace=self.grace, cancel_grace=self.cancel_grace):
            return False
        log.error("the cluster's processes did not end within %g s of %s: killing its process tree",
                  shutdown_bound(grace=self.grace, cancel_grace=self.cancel_grace), self.signal)
        self._kill()
        return True

    def _begin(self, now: float) -> None:
        self.began = now
        log.warning("%s: stopping; admitting nothing more, running runs get %g s to end", self.signal, self.grace)
        self.holders = [loop.holder for loop in self.loops]
        stop_loops(self.loops, timeout=2.0)
        self._note_workers()
        released = self._quietly(release_unstarted, holder_prefix=self.holders) or 0
        if released:
            log.info("returned %d admitted but unstarted runs to the queue", released)
        if self.cluster.stop_event is not None:
            # in a thread: a multiprocessing Event's set() waits for its waiter (the sentinel) to wake, and a hung
            # sentinel would hold this loop, and the bound, with it
            threading.Thread(target=self.cluster.stop_event.set, name="etl-stop-sentinel", daemon=True).start()

    def _note_workers(self) -> None:
        """The worker ids of the processes under the sentinel (kept: a worker ended by force still owns its run)."""
        sentinel = self.cluster.sentinel
        if sentinel is not None and sentinel.pid:
            self.workers.update(worker_name(pid) for pid in descendants(sentinel.pid))

    def _runs(self) -> list | None:
        return self._quietly(runs_of_workers, self.workers)

    def _kill(self) -> None:
        sentinel = self.cluster.sentinel
        killed = []
        if sentinel is not None and sentinel.pid and sentinel.is_alive():  # not reaped: its pid is still its own
            killed = kill_tree(sentinel.pid)
            sentinel.join(5)
        killed += kill_tree(os.getpid(), root_too=False)  # what the sentinel's end left: re-parented here
        if killed:
            log.error("killed %d process(es) of the cluster's tree: %s", len(killed), killed)
        for run in self._runs() or []:
            kill_run_processes(run.pk)  # a command's daemon that left every group and session

    def finish(self) -> None:
        """After the sentinel ended (or was killed): nothing of the tree is left, and no run of this cluster stays
        RUNNING or admitted."""
        if self.asked:
            self._note_workers()
            self._kill()
        reap_orphans(keep=set())
        if self.asked:
            runs = self._runs() or []
            done = self._quietly(runs_requeue_after_shutdown, runs) or 0
            if done:
                log.warning("returned %d run(s) whose workers were ended to the queue (attempt not spent)", done)
        holders = self.holders or [loop.holder for loop in self.loops]
        released = self._quietly(release_unstarted, holder_prefix=holders) or 0
        if released:
            log.info("returned %d admitted but unstarted runs to the queue", released)

    @staticmethod
    def _quietly(func, *args, **kwargs):
        """A database step of the stop: a failure is logged and the stop goes on (its bound holds regardless)."""
        try:
            return func(*args, **kwargs)
        except Exception:
            log.warning("a step of the cluster's stop failed (%s)", getattr(func, "__name__", func), exc_info=True)
            return None


__all__ = ["ClusterStop", "OwnGroupCluster", "STOP_TICK"]
