"""`manage.py qcluster`: django-q2's cluster plus our dispatch, governance and alerts loops."""
import logging
import os
import signal
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connections
from django_q.cluster import Cluster

from scheduler.loops import start_loops, stop_loops
from scheduler.rollout import Rollout
from scheduler.services.runs.dependencies import all_cycles
from scheduler.services.worker.supervisor import become_subreaper, reap_orphans
from scheduler.services.cluster.shutdown import release_unstarted

log = logging.getLogger("scheduler.cluster")
ORPHAN_CHECK_SECONDS = 0.5  # far below ETL_STUCK_SECONDS: a dead worker's command is gone before its run's retry


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

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018  the cluster signs its messages
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
        cluster = Cluster()
        loops: list = []
        stopping = {"flag": False}

        def on_signal(signum, frame):
            # stop admitting first, then let django-q2 drain its workers
            if stopping["flag"]:
                return
            stopping["flag"] = True
            stop_loops(loops)
            cluster.sig_handler(signum, frame)

        # the code snapshot before the fork: the workers run exactly what it records; SIGHUP asks for a restart
        rollout = Rollout(options["cluster_name"])
        signal.signal(signal.SIGHUP, rollout.on_sighup)
        cluster.start()
        rollout.join()
        if not options["no_loops"]:
            loops.extend(start_loops(options["cluster_name"]))
        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        if options["run_once"]:
            on_signal(signal.SIGTERM, None)
        while cluster.sentinel is not None and cluster.sentinel.is_alive():
            reap_orphans(keep={cluster.sentinel.pid})
            if rollout.due() and not stopping["flag"]:
                rollout.draining()  # new code: admit nothing more, let the workers finish what they hold
                stop_loops(loops)
                cluster.stop_event.set()
            time.sleep(ORPHAN_CHECK_SECONDS)
        stop_loops(loops)
        reap_orphans(keep=set())
        connections.close_all()

        released = release_unstarted(holder_prefix=[loop.holder for loop in loops])
        if released:
            log.info("returned %d admitted but unstarted runs to the queue", released)
        if rollout.restarting and not stopping["flag"]:
            rollout.restart()  # does not return: this process runs again on the code installed now
        rollout.leave()
