"""`manage.py qcluster`: django-q2's cluster plus our dispatch, governance and alerts loops.

SIGINT or SIGTERM stops it within a bound, and nothing of its process tree is left (scheduler/cluster_stop.py).
"""
import logging
import math
import os
import signal
import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections
from django.utils import timezone

from scheduler.cluster_stop import STOP_TICK, ClusterStop, OwnGroupCluster
from scheduler.loops import start_loops, stop_loops
from scheduler.rollout import Rollout
from scheduler.services.admission.clusters import clusters_live
from scheduler.services.runs.dependencies import all_cycles
from scheduler.services.worker.processes import exit_now, pid_alive
from scheduler.services.worker.supervisor import become_subreaper, reap_orphans

log = logging.getLogger("scheduler.cluster")
DEFAULT_GRACE = 30.0
ORPHAN_CHECK_SECONDS = 0.5  # far below ETL_STUCK_SECONDS: a dead worker's command is gone before its run's retry


def _warn_of_another_cluster_here() -> None:
    """A second cluster on one machine is allowed (clusters share the queue) but seldom meant, as when a second
    `make run` starts beside a first: say so, with the pid to stop."""
    try:
        here = [c for c in clusters_live(now=timezone.now()) if c.host == socket.gethostname()]
    except Exception:  # the database is away: the cluster starts all the same
        return
    for other in here:
        if other.pid != os.getpid() and pid_alive(other.pid):
            log.warning("another cluster runs on this machine: %s (pid %d); both take runs from the one queue. "
                        "If this one should replace it, stop it (SIGTERM) first", other.name, other.pid)


class Command(BaseCommand):
    help = "Start a django-q2 cluster with the scheduler's dispatch, governance and alerts loops."

    def add_arguments(self, parser):
        parser.add_argument(
            "-n",
            "--name",
            dest="cluster_name",
            default=None,
            help="This cluster's identity in leases and worker ids (ETL_CLUSTER_ID); the queue is shared.",
        )
        parser.add_argument("--no-loops", action="store_true", help="Workers only, no dispatch/governance loops.")
        parser.add_argument("--run-once", action="store_true", help="Start and stop (smoke test).")
        parser.add_argument(
            "--grace", type=float, default=DEFAULT_GRACE,
            help="On SIGINT or SIGTERM, seconds the running runs get to end by themselves before they are stopped "
                 "as a cancel stops them and re-queued (default: %(default)s).",
        )

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018  the cluster signs its messages
        if not (math.isfinite(options["grace"]) and options["grace"] >= 0):
            raise CommandError(f"--grace: must be zero or more seconds, got {options['grace']}")
        if options["cluster_name"]:
            os.environ["ETL_CLUSTER_ID"] = options["cluster_name"]

        for cycle in all_cycles():
            log.error("dependency cycle between schedules: %s (its runs will wait forever; fix with the admin)",
                      " -> ".join(cycle))

        # a connection opened before the fork would be shared with the Sentinel
        # and closed under our feet when a child exits
        connections.close_all()
        # what a worker killed under a command leaves behind comes here, to be ended (reap_orphans), not to init
        become_subreaper()
        cluster = OwnGroupCluster()
        loops: list = []
        # a signal is only noted; the main loop below stops the cluster within a bound (cluster_stop.py)
        stop = ClusterStop(cluster, loops, grace=options["grace"])
        signal.signal(signal.SIGTERM, stop.ask)
        signal.signal(signal.SIGINT, stop.ask)

        # the code snapshot before the fork: the workers run exactly what it records; SIGHUP asks for a restart
        rollout = Rollout(options["cluster_name"])
        signal.signal(signal.SIGHUP, rollout.on_sighup)
        cluster.start()
        _warn_of_another_cluster_here()
        rollout.join()
        if not options["no_loops"] and not stop.asked:
            loops.extend(start_loops(options["cluster_name"]))
        if options["run_once"]:
            stop.ask(signal.SIGTERM)
        while cluster.sentinel is not None and cluster.sentinel.is_alive():
            reap_orphans(keep={cluster.sentinel.pid})
            if stop.asked:
                if stop.step(time.monotonic()):
                    break
            elif rollout.due():
                rollout.draining()  # new code: admit nothing more, let the workers finish what they hold
                stop_loops(loops)
                cluster.stop_event.set()
            time.sleep(STOP_TICK if stop.asked else ORPHAN_CHECK_SECONDS)
        stop_loops(loops)
        stop.finish()
        connections.close_all()
        if rollout.restarting and not stop.asked:
            rollout.restart()  # does not return: this process runs again on the code installed now
        rollout.leave()
        log.info("cluster stopped")
        if stop.asked:
            exit_now(0)  # stopped on a signal: within its bound, not after the interpreter's teardown
