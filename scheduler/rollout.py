"""A cluster rolls out new code: it notices, finishes its running runs, and starts again on the new code.

`manage.py qcluster` keeps one `Rollout`. It snapshots the code the process imported before the cluster forks its
workers (so they run exactly that), writes the cluster's row, and then, every ETL_CODE_CHECK_SECONDS from the
cluster's main loop, beats the row and compares the code installed on this machine now with the code it runs
(the versions of the packages announcing pipelines, the digests of the modules that registered them). Newer code,
`manage.py reload_workers` (a request on the row) or SIGHUP to the cluster's main process ask for a restart:

1. the loops stop (nothing more is admitted by this cluster) and django-q2's sentinel is told to stop: it takes
   no more messages and its workers finish the tasks they hold, so every run this cluster began ends as usual;
2. the runs it admitted that no worker began go back to the queue (qcluster's `release_unstarted`);
3. the process executes itself again (same pid, same arguments): a fresh interpreter imports the new code, and
   django-q2 forks new workers from it. Workers forked from the old process could only ever run the old code.

No run is lost (an unstarted run's token is cleared, so its old message is stale) or doubled (a claim is a
compare-and-set on that token).
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from scheduler.loops import holder_id
from scheduler.pipelines.code import code_changes, code_summary, installed_code, loaded_code
from scheduler.pipelines.entrypoints import load_problems
from scheduler.pipelines.registry import all_pipelines, all_workflows, registered_modules
from scheduler.services.admission.clusters import (
    cluster_beat,
    cluster_draining,
    cluster_join,
    cluster_leave,
    cluster_restarted,
    target_key,
)

log = logging.getLogger("scheduler.cluster")


class Rollout:
    """One cluster process's code: what it runs, whether newer code waits, and the restart onto it."""

    def __init__(self, cluster: str | None = None) -> None:
        self.name = cluster or os.environ.get("ETL_CLUSTER_ID") or settings.Q_CLUSTER.get("name", "etl")
        self.holder = holder_id(cluster)
        self.pid = os.getpid()
        self.modules = registered_modules()
        self.targets = sorted([target_key("pipeline", p.id) for p in all_pipelines()]
                              + [target_key("workflow", w.id) for w in all_workflows()])
        for spec in [*all_pipelines(), *all_workflows()]:
            spec.code  # noqa: B018  each target's package resolved now, before the workers fork (they inherit it)
        self.code = loaded_code(self.modules)
        self.code_version = code_summary(self.code)
        self.wanted = ""  # why a restart is wanted; '' while none is
        self.restarting = False
        self.hangup = threading.Event()
        self.next_check = 0.0

    # --- its row -----------------------------------------------------------------------------------------

    def join(self) -> None:
        try:
            cluster_join(holder=self.holder, name=self.name, host=socket.gethostname(), pid=self.pid, code=self.code,
                         code_version=self.code_version, targets=self.targets,
                         problems=[f"{where}: {error}" for where, error in load_problems], now=timezone.now())
        except Exception:  # the database is away: the next beat writes the row
            log.warning("could not write this cluster's row", exc_info=True)
        self.next_check = time.monotonic() + settings.ETL_CODE_CHECK_SECONDS
        log.info("cluster %s runs %s", self.name, self.code_version)

    def leave(self) -> None:
        try:
            cluster_leave(holder=self.holder)
        except Exception:
            log.warning("could not remove this cluster's row", exc_info=True)

    # --- the look ------------------------------------------------------------------------------------------

    def on_sighup(self, signum, frame) -> None:
        # forked children inherit the handler: only the cluster's main process restarts (a worker ignores it)
        if os.getpid() == self.pid:
            self.hangup.set()

    def due(self) -> str:
        """From the cluster's main loop: why the cluster should restart now ('' for not), looked at once per
        ETL_CODE_CHECK_SECONDS (a SIGHUP at once). Returns a reason once; the caller drains and restarts."""
        hangup = self.hangup.is_set() and not self.wanted
        if not hangup and time.monotonic() < self.next_check:
            return ""
        self.next_check = time.monotonic() + settings.ETL_CODE_CHECK_SECONDS
        if self.wanted:
            self.beat()  # draining: still beating, so the cluster and the targets it knows still count as running
            return ""
        self.wanted = "SIGHUP" if hangup else self.check()
        return self.wanted

    def beat(self) -> str:
        """The row's beat; a reload request on it as a reason ('' for none)."""
        try:
            close_old_connections()
            row = cluster_beat(holder=self.holder, now=timezone.now())
            if row is None:
                self.join()  # removed (pruned while the database was away): announce it again
            elif row.reload_requested_at is not None:
                return f"asked by reload_workers: {row.reload_reason or 'no reason given'}"
        except Exception:
            log.warning("cluster beat failed", exc_info=True)
        finally:
            connection.close()  # one short session per look, not one held open by every cluster's main process
        return ""

    def check(self) -> str:
        """One look: the row's beat (a reload request on it), then the code installed beside this process."""
        asked = self.beat()
        if asked:
            return asked
        changes = code_changes(self.code, installed_code(self.modules))
        if changes:
            return "newer code installed: " + "; ".join(changes)
        return ""

    # --- the restart ----------------------------------------------------------------------------------------

    def draining(self) -> None:
        """The cluster finishes its running runs: the row says so, and the log says why."""
        self.restarting = True
        log.warning("cluster %s restarts its workers once its running runs end (%s)", self.name, self.wanted)
        try:
            cluster_draining(holder=self.holder, now=timezone.now(), why=self.wanted)
        except Exception:
            log.warning("could not mark this cluster as draining", exc_info=True)

    def restart(self) -> None:
        """The runs have ended: record why, and execute this process again on the code installed now."""
        try:
            after = code_summary(installed_code(self.modules))
            cluster_restarted(holder=self.holder, name=self.name, why=self.wanted[:500], before=self.code_version,
                              after=after, now=timezone.now())
        except Exception:
            log.warning("could not record the restart", exc_info=True)
        self.leave()
        connection.close()
        log.warning("cluster %s restarts on the code installed now", self.name)
        for handler in logging.getLogger().handlers + log.handlers:
            handler.flush()
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


__all__ = ["Rollout"]
