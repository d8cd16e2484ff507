"""Fencing (issue 20, point 5): a worker cut off from PostgreSQL stops its own run before governance may call it
lost; governance re-queues the run only after that, and the two attempts never run at the same time.

How the test is built, and why:

* The worker cluster "cut-off" (`qcluster --no-loops`, one worker) reaches PostgreSQL only through a
  `tests.tcpproxy.TcpProxy`. Freezing the proxy is the network partition: no byte moves either way, every
  socket stays open (a silent network, not a refused connection), and the machine's PostgreSQL is never touched.
* No cluster runs the dispatch or governance loops (`--no-loops`). The test process is the dispatcher
  (`admit_runs`) and governance (`stuck_runs` with the real now and the workers' ETL_STUCK_SECONDS), talking
  to PostgreSQL directly, so governance is never inside the frozen cluster. The broker is django-q2's ORM
  broker in the same database: the cut-off cluster receives its message through the proxy too, so a frozen
  proxy cuts it off from its work as well as from its heartbeat (with Redis it would still take new runs).
* Once governance re-queued the run, a second cluster "reachable" (direct to PostgreSQL, `--no-loops`) is
  started and runs attempt 2 while "cut-off" is still partitioned: the case fencing exists for.
* Finally the proxy is thawed: what the fenced worker had held back reaches the database late, and must not
  change the run (a fenced worker never writes its run's end); the cut-off cluster then stops cleanly.

The run's code writes "<word> <attempt> <role> <pid> <time>" lines to a file every 0.1 s, so the test sees when
each attempt ran and which processes were still alive. Three kinds of run (KINDS): a command that ignores
SIGTERM and a child it started (both must be dead: SIGKILL after the fence's grace), a Python pipeline that
checks for a stop (it must have stopped on RunStopped("fence"); its worker process goes on), and one that
ignores it (its worker process must be dead). The only ordering asserted is the one the issue demands: attempt
1 is dead or stopped, and silent, before its last written heartbeat is ETL_STUCK_SECONDS old, i.e. before
governance may and does re-queue it; attempt 2 begins after that. No duration is asserted.
"""
from __future__ import annotations

import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone as dj_timezone

from scheduler.models import Run, RunStatus
from scheduler.services.admission.dispatch import admit_runs
from scheduler.services.cluster.governance import stuck_runs
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.worker.supervisor import pid_alive
from tests.integration.cluster import child_database_url, start_cluster, stop_cluster, wait_until
from tests.reliability import fencing_pipelines  # noqa: F401  registers the pipelines in this process too
from tests.tcpproxy import TcpProxy

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HEARTBEAT, STUCK, FENCE, GRACE = 0.3, 6.0, 3.0, 1.0
WORKER_ENV = {
    "ETL_HEARTBEAT_SECONDS": str(HEARTBEAT),
    "ETL_STUCK_SECONDS": str(STUCK),
    # STUCK/2 rather than the default STUCK - 3 * HEARTBEAT (5.1 s): the kill then comes (STUCK - FENCE) / 2 =
    # 1.5 s before governance may act, not 0.45 s, so a busy 2-core machine cannot turn the ordering into a race
    "ETL_FENCE_SECONDS": str(FENCE),
    "ETL_CANCEL_GRACE_SECONDS": str(GRACE),
    "Q_WORKERS": "1",
    "REDIS_URL": "",  # the ORM broker: the partition cuts the worker off from its messages too
    "ETL_PIPELINE_MODULES": "scheduler.pipelines.demo,tests.reliability.fencing_pipelines",
}

ALIVE = textwrap.dedent("""
    import os, signal, subprocess, sys, time

    out, role = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "command"
    attempt = os.environ["ETL_ATTEMPT"]

    def line(word):
        with open(out, "a") as f:  # one short O_APPEND write a line: lines of several processes do not mix
            f.write(f"{word} {attempt} {role} {os.getpid()} {time.time():.6f}\\n")

    if role == "command":
        # it shrugs off SIGTERM: only the SIGKILL after the fence's grace stops it
        signal.signal(signal.SIGTERM, lambda *_: line("term"))
        child = subprocess.Popen([sys.executable, __file__, out, "child"])
    n = 0
    while attempt == "1" or n < 10:  # attempt 1 never ends on its own; a later one writes 10 lines and ends
        line("alive")
        n += 1
        time.sleep(0.1)
    if role == "command":
        child.wait()
""")


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("the fencing test needs PostgreSQL (set DATABASE_URL=postgres://...): it cuts a worker off "
                    "from its database server with a TCP proxy, and SQLite has no server to cut off")
    if "redis" in settings.Q_CLUSTER:
        pytest.skip("the fencing test needs the ORM broker (REDIS_URL unset), so the partition cuts the worker "
                    "off from its messages too")


def _through(proxy: TcpProxy) -> str:
    """The test database's URL with the proxy's address in place of the server's."""
    parts = urlsplit(child_database_url())
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))


def _upstream() -> tuple[str, int]:
    s = connection.settings_dict
    return s.get("HOST") or "127.0.0.1", int(s.get("PORT") or 5432)


def _lines(path: Path) -> list[tuple[str, int, str, int, float]]:
    """(word, attempt, role, pid, time) of every complete line."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_text().splitlines():
        parts = raw.split()
        if len(parts) == 5:
            word, attempt, role, pid, at = parts
            out.append((word, int(attempt), role, int(pid), float(at)))
    return out


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


# what each kind of run is, which of its processes must be dead before governance may re-queue it, and the line
# that shows how it was stopped
KINDS = {
    # a command that shrugs off SIGTERM, and its child: SIGTERM to the group, SIGKILL after the fence's grace
    "command": {"roles": {"command", "child"}, "must_die": {"command", "child"}, "sign": "term"},
    # a Python pipeline that checks for a stop: RunStopped("fence"); its worker process goes on
    "pipeline": {"roles": {"pipeline"}, "must_die": set(), "sign": "stopped-fence"},
    # a Python pipeline that ignores the stop: its worker process is ended
    "stubborn": {"roles": {"stubborn"}, "must_die": {"stubborn"}, "sign": "ignored"},
}


def _schedule(make_schedule, kind: str, tmp_path: Path, out: Path):
    if kind == "command":
        script = tmp_path / "alive.py"
        script.write_text(ALIVE)
        return make_schedule("fenced-command", target_kind="command", target_id="", retry_max_attempts=3,
                             command={"argv": [sys.executable, str(script), str(out)]})
    return make_schedule(f"fenced-{kind}", target_id=f"reliability.{'alive' if kind == 'pipeline' else kind}",
                         retry_max_attempts=3, params={"out": str(out)})


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_worker_cut_off_from_postgresql_stops_its_run_before_governance_requeues_it(
        kind, postgres, make_schedule, tmp_path):
    spec = KINDS[kind]
    out = tmp_path / "alive.txt"
    schedule = _schedule(make_schedule, kind, tmp_path, out)
    logs = {name: tmp_path / f"{name}.log" for name in ("cut-off", "reachable")}
    with TcpProxy(_upstream()) as proxy:
        cut_off = start_cluster("cut-off", log_path=logs["cut-off"], args=("--no-loops",),
                                extra_env={**WORKER_ENV, "DATABASE_URL": _through(proxy)})
        reachable = None
        try:
            run = run_trigger_manual(schedule=schedule, actor="tests")
            assert admit_runs(now=dj_timezone.now(), holder="tests-dispatcher") == [run.pk]
            wait_until(lambda: {role for _w, a, role, _p, _t in _lines(out) if a == 1} == spec["roles"],
                       timeout=60, what=f"the {kind} to run", log_path=logs["cut-off"])
            run.refresh_from_db()
            assert run.status == RunStatus.RUNNING and run.worker_id.startswith("cut-off@")
            pids = {role: pid for _w, a, role, pid, _t in _lines(out) if a == 1}
            doomed = {pids[role] for role in spec["must_die"]}

            proxy.freeze()

            # governance, as its loop would call it, from the freeze on: it re-queues once the heartbeat is old
            requeued, deadline = None, time.monotonic() + 60
            while requeued is None and time.monotonic() < deadline:
                alive = {pid for pid in doomed if pid_alive(pid)}
                beat = Run.objects.values_list("heartbeat_at", flat=True).get(pk=run.pk)
                result = stuck_runs(now=dj_timezone.now(), stuck_seconds=STUCK)
                if run.pk in result["requeued"]:
                    requeued = dj_timezone.now()
                    break
                assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
                time.sleep(0.05)
            assert requeued is not None, "governance never re-queued the silent run"
            # the order: what had to die was dead when governance re-queued the run (looked at just
            # before the call that did it) ...
            assert alive == set(), f"still alive when governance re-queued the run: {sorted(alive)}"
            first = [line for line in _lines(out) if line[1] == 1]
            last_of_first = _at(max(at for *_rest, at in first))
            # ... and the run's code silent before the last heartbeat its worker wrote was ETL_STUCK_SECONDS old
            assert last_of_first < beat + timedelta(seconds=STUCK) <= requeued
            assert spec["sign"] in {word for word, *_ in first}, f"no {spec['sign']!r} line: {first[-3:]}"
            if kind == "pipeline":
                assert pid_alive(pids["pipeline"]), "a pipeline that stopped when asked keeps its worker process"

            run.refresh_from_db()
            assert run.status == RunStatus.QUEUED and run.attempt == 2, (run.status, run.attempt, run.reason)
            assert run.stop_requested_at is None  # the fenced worker wrote nothing: its end is governance's
            assert run.reason.startswith("worker lost: no heartbeat from cut-off@")

            # attempt 2 on a worker that reaches the database, while the cut-off one is still partitioned
            reachable = start_cluster("reachable", log_path=logs["reachable"], args=("--no-loops",),
                                      extra_env=WORKER_ENV)
            assert admit_runs(now=dj_timezone.now(), holder="tests-dispatcher") == [run.pk]
            wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED, timeout=60,
                       what="attempt 2 to succeed", log_path=logs["reachable"])
            run.refresh_from_db()
            assert run.attempt == 2 and run.worker_id.startswith("reachable@")
            lines = _lines(out)
            second = [line for line in lines if line[1] == 2]
            assert {role for _w, _a, role, _p, _t in second} == spec["roles"]
            # never at the same time: every line of attempt 1 before the first of attempt 2
            assert last_of_first < requeued < _at(min(at for *_rest, at in second))
            assert [line for line in lines if line[1] == 1] == first, "attempt 1 wrote after it was fenced"

            # the partition heals: the fenced worker's held-back writes land, and change nothing
            proxy.thaw()
            assert stop_cluster(cut_off) == 0, logs["cut-off"].read_text()[-3000:]
            assert f"run {run.pk} fenced" in logs["cut-off"].read_text()
            run.refresh_from_db()
            assert run.status == RunStatus.SUCCEEDED and run.attempt == 2 and run.worker_id.startswith("reachable@")
        finally:
            proxy.thaw()
            for proc in (cut_off, reachable):
                if proc is not None and proc.poll() is None:
                    stop_cluster(proc)
