"""Run control against a real `manage.py qcluster`: commands, cancel, terminate, timeouts, stubborn code, limits.

Every command is a `sys.executable -c` script. What the tests assert about
processes comes from files the commands write (their pids, start lines, what
they saw alive when they began) and from /proc, never from elapsed time: each
wait is a poll of the database or a file with a deadline.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

import tests.integration.pipelines_for_tests  # noqa: F401  (registers the itest.* pipelines here too)
from scheduler.models import AuditEntry, Run, RunLogLine, RunStatus, Schedule, WatermarkState, WorkloadClass
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.stop import run_cancel
from scheduler.services.runs.queue import run_trigger_manual
from scheduler.services.worker.supervisor import pid_alive
from tests.integration.cluster import start_cluster, stop_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
PY = sys.executable
S = RunStatus
MODULES = "scheduler.pipelines.demo,tests.integration.pipelines_for_tests"
BASE_ENV = {
    "ETL_PIPELINE_MODULES": MODULES,
    "ETL_HEARTBEAT_SECONDS": "0.3",
    "ETL_CANCEL_GRACE_SECONDS": "2",
    # far away: a run that ends promptly was ended by the worker or the reaper, never by governance's stuck check
    "ETL_STUCK_SECONDS": "60",
    "ETL_GOVERNANCE_INTERVAL": "0.5",
}
WAIT = 30  # the deadline of each wait: generous, never reached when things work

# --- what the commands run ---------------------------------------------------------

PRELUDE = '''
import json, os, signal, subprocess, sys, time

def note(path, text):
    # one O_APPEND write per line: lines of several processes never interleave
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (text + "\\n").encode())
    finally:
        os.close(fd)

def wait_for(path, seconds=60):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.02)
'''

LIVE_OUTPUT = PRELUDE + '''
print("hello on stdout", flush=True)
print("hello on stderr", file=sys.stderr, flush=True)
wait_for(os.environ["RELEASE"])
print("released", flush=True)
'''

EXIT_3 = PRELUDE + '''
print("step one", flush=True)
print("boom: table missing", file=sys.stderr, flush=True)
sys.exit(3)
'''

RESULT = PRELUDE + '''
with open(os.environ["ETL_RESULT_FILE"], "w") as f:
    json.dump({"rows": 42, "watermark": 1234}, f)
print("loaded 42 rows")
'''

GRANDCHILDREN = PRELUDE + '''
for _ in range(2):
    kid = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    note(os.environ["PIDS"], f"grandchild {kid.pid}")
time.sleep(300)
'''

# main -> child -> 2 grandchildren (one process group), and a daemon that left the group (double fork + setsid)
TREE = PRELUDE + '''
PIDS = os.environ["PIDS"]
note(PIDS, f"main {os.getpid()}")
child = subprocess.Popen([sys.executable, "-c", GRANDCHILDREN_CODE])
note(PIDS, f"child {child.pid}")
first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        note(PIDS, f"daemon {os.getpid()}")
        time.sleep(300)
    os._exit(0)
os.waitpid(first, 0)
deadline = time.monotonic() + 30
while len(open(PIDS).read().splitlines()) < 5 and time.monotonic() < deadline:
    time.sleep(0.02)
print("tree ready", flush=True)
if os.environ["MODE"] == "sleep":
    time.sleep(300)
'''.replace("GRANDCHILDREN_CODE", repr(GRANDCHILDREN))

# stops on SIGTERM once the test lets it (RELEASE), with its own exit code
HANDLES_TERM = PRELUDE + '''
MARKS = os.environ["MARKS"]
def on_term(signum, frame):
    note(MARKS, f"termed {os.getpid()}")
    wait_for(os.environ["RELEASE"], 30)
    print("clean exit after SIGTERM", flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
note(MARKS, f"main {os.getpid()}")
time.sleep(300)
'''

# notes the SIGTERM and carries on sleeping (so does its child): only SIGKILL ends them
IGNORES_TERM = PRELUDE + '''
MARKS = os.environ["MARKS"]
signal.signal(signal.SIGTERM, lambda signum, frame: note(MARKS, f"termed {os.getpid()}"))
child = subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
note(MARKS, f"main {os.getpid()}")
note(MARKS, f"child {child.pid}")
time.sleep(300)
'''

SLEEPS = PRELUDE + '''
note(os.environ["MARKS"], f"attempt {os.environ['ETL_ATTEMPT']} {os.getpid()}")
time.sleep(300)
'''

# records, as it begins, which of the processes listed in WATCH are still there (a zombie counts as there)
RECORD_START = PRELUDE + '''
pids = [int(line.split()[1]) for line in open(os.environ["WATCH"]).read().splitlines()
        if line.split()[0] in ("main", "child")]
alive = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
note(os.environ["RECORD"], json.dumps({"pid": os.getpid(), "watched": pids, "alive": alive}))
'''


def _overlapping(*, ignore_term: bool) -> str:
    """A long command of an overlap test: "start <pid> alive=<earlier runs' pids still there>", "end <pid>"."""
    on_term = ('signal.signal(signal.SIGTERM, lambda signum, frame: note(SHARED, f"termed {os.getpid()}"))'
               if ignore_term else '''
def on_term(signum, frame):
    time.sleep(0.5)  # winding down takes a moment: a gate that did not wait would start the next run meanwhile
    note(SHARED, f"end {os.getpid()}")
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)''')
    return PRELUDE + '''
SHARED = os.environ["SHARED"]
ON_TERM
earlier = [int(line.split()[1]) for line in (open(SHARED).read().splitlines() if os.path.exists(SHARED) else [])
           if line.startswith("start ")]
alive = [pid for pid in earlier if os.path.exists(f"/proc/{pid}")]
note(SHARED, f"start {os.getpid()} alive={','.join(map(str, alive))}")
time.sleep(300)
'''.replace("ON_TERM", on_term)


# --- helpers ---------------------------------------------------------------------

def _command(make_schedule, name: str, code: str, env: dict | None = None, **fields) -> Schedule:
    command = {"argv": [PY, "-c", code], **({"env": {k: str(v) for k, v in env.items()}} if env else {})}
    fields.setdefault("retry_max_attempts", 1)
    return make_schedule(name, target_kind="command", target_id="", command=command, **fields)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _pids(path: Path) -> list[int]:
    kinds = ("main", "child", "grandchild", "daemon")
    return [int(line.split()[1]) for line in _lines(path) if line.split()[0] in kinds]


def _still_there(pids: list[int]) -> list[int]:
    """The pids that still have a /proc entry (alive, or a zombie nobody reaped): should be none."""
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def _log(run) -> list[tuple[str, str]]:
    return list(RunLogLine.objects.filter(run=run).order_by("seq").values_list("source", "message"))


def _final(run, log: Path, *, timeout: float = WAIT) -> Run:
    return wait_until(lambda: (r := Run.objects.get(pk=run.pk)).is_final and r, timeout=timeout,
                      what=f"run {run.pk} to end", log_path=log)


@contextmanager
def cluster(tmp_path: Path, **env):
    """A qcluster for one test; at the end every schedule is disabled and every active run killed first (a stopping
    cluster waits for its workers, and a command of these tests sleeps for minutes), then the cluster stops."""
    log = tmp_path / "cluster.log"
    proc = start_cluster("control", log_path=log, extra_env={**BASE_ENV, **{k: str(v) for k, v in env.items()}})
    ok = False
    try:
        yield log
        ok = True
    finally:
        try:
            Schedule.objects.update(enabled=False)
            wait_until(_nothing_active, timeout=WAIT, what="every run to end", log_path=log)
        finally:
            code = stop_cluster(proc)
            _kill_leftovers(tmp_path)
    if ok:
        assert code == 0, log.read_text()[-3000:]


def _nothing_active() -> bool:
    active = list(Run.objects.filter(status__in=S.active()).select_related("schedule"))
    for run in active:
        try:
            run_cancel(run=run, actor="tests", reason="test over", force=True)
        except ServiceError:
            pass  # it ended meanwhile
    return not active


def _kill_leftovers(tmp_path: Path) -> None:
    """Last resort after a failed test: no process a command of this test recorded outlives it."""
    for path in tmp_path.glob("*.pids"):
        for pid in _pids(path):
            try:
                if b"-c" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# --- 1. commands on a real cluster ----------------------------------------------------

def test_a_commands_stdout_and_stderr_reach_the_run_log_while_it_runs(make_schedule, tmp_path):
    release = tmp_path / "release"
    schedule = _command(make_schedule, "live", LIVE_OUTPUT, env={"RELEASE": release})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        wait_until(lambda: {("stdout", "hello on stdout"), ("stderr", "hello on stderr")} <= set(_log(run)),
                   timeout=WAIT, what="both lines in the run log", log_path=log)
        assert Run.objects.get(pk=run.pk).status == S.RUNNING, "the lines were stored while the command ran"
        release.touch()
        run = _final(run, log)
    assert run.status == S.SUCCEEDED, run.reason
    assert run.exit_code == 0
    assert ("stdout", "released") in _log(run)


def test_a_non_zero_exit_fails_with_its_code_and_tail_and_a_result_file_reports_rows_and_the_mark(
        make_schedule, tmp_path):
    failing = _command(make_schedule, "exit3", EXIT_3)
    reporting = _command(make_schedule, "result", RESULT,
                         watermark_config={"type": "integer", "column": "id", "initial": 0})
    runs = [run_trigger_manual(schedule=s, actor="tests") for s in (failing, reporting)]
    with cluster(tmp_path) as log:
        failed, succeeded = [_final(run, log) for run in runs]
    assert failed.status == S.FAILED and failed.exit_code == 3
    assert failed.reason == "command exited with exit code 3"
    assert "boom: table missing" in failed.error and "step one" in failed.error, "the tail of the output"
    assert succeeded.status == S.SUCCEEDED, succeeded.reason
    assert (succeeded.exit_code, succeeded.rows_loaded, succeeded.watermark_after) == (0, 42, "1234")
    assert WatermarkState.objects.get(schedule=reporting).value == "1234"


@pytest.mark.parametrize("ending", ["success", "cancel", "timeout"])
def test_no_process_of_a_command_outlives_its_run_children_grandchildren_or_a_setsid_daemon(
        make_schedule, tmp_path, ending):
    pids = tmp_path / "tree.pids"
    mode = "exit" if ending == "success" else "sleep"  # success: the main process exits, its children sleep on
    schedule = _command(make_schedule, "tree", TREE, env={"PIDS": pids, "MODE": mode},
                        timeout_seconds=3 if ending == "timeout" else None)
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        wait_until(lambda: len(_pids(pids)) == 5, timeout=WAIT, what="the command's process tree", log_path=log)
        if ending == "cancel":
            assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests")
        run = _final(run, log)
        left = _still_there(_pids(pids))  # read at once: the run's end is written only after its processes are gone
    assert [line.split()[0] for line in _lines(pids)].count("daemon") == 1
    assert run.status == {"success": S.SUCCEEDED, "cancel": S.CANCELLED, "timeout": S.FAILED}[ending], run.reason
    assert left == [], f"processes of run {run.pk} left alive or unreaped: {left}"
    assert not any("could not be ended" in message for _, message in _log(run))


# --- 2. cancel and terminate ----------------------------------------------------------

def test_a_command_that_handles_sigterm_shows_stopping_then_ends_cancelled_with_its_own_exit(make_schedule, tmp_path):
    marks, release = tmp_path / "term.pids", tmp_path / "release"
    schedule = _command(make_schedule, "handles", HANDLES_TERM, env={"MARKS": marks, "RELEASE": release})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=30) as log:  # never reached: the command exits by itself
        wait_until(lambda: _pids(marks), timeout=WAIT, what="the command to start", log_path=log)
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests", reason="not today")
        wait_until(lambda: any(line.startswith("termed") for line in _lines(marks)), timeout=WAIT,
                   what="the command to get SIGTERM", log_path=log)
        stopping = Run.objects.get(pk=run.pk)  # the command is in its handler, waiting for the test
        assert (stopping.status, stopping.shown_status, stopping.stop_kind) == (S.RUNNING, "STOPPING", "cancel")
        assert stopping.stop_requested_at is not None and stopping.finished_at is None
        release.touch()
        run = _final(run, log)
    assert (run.status, run.reason) == (S.CANCELLED, "not today")
    assert run.exit_code == 0, "the command's own exit, not a kill"
    assert ("stdout", "clean exit after SIGTERM") in _log(run)
    assert AuditEntry.objects.filter(action="run.stop.cancel", target_id=str(run.pk)).count() == 1
    assert _still_there(_pids(marks)) == []


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace_and_ends_cancelled(make_schedule, tmp_path):
    marks = tmp_path / "ignore.pids"
    schedule = _command(make_schedule, "ignores", IGNORES_TERM, env={"MARKS": marks})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=1) as log:
        wait_until(lambda: len(_pids(marks)) == 2, timeout=WAIT, what="the command to start", log_path=log)
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests")
        run = _final(run, log)
        left = _still_there(_pids(marks))
    assert run.status == S.CANCELLED and run.stop_kind == "cancel"
    assert any(line.startswith("termed") for line in _lines(marks)), "it got SIGTERM first, and ignored it"
    assert run.exit_code == -signal.SIGKILL
    assert left == []


def test_terminate_kills_a_command_that_ignores_sigterm_without_waiting_for_the_grace(make_schedule, tmp_path):
    marks = tmp_path / "ignore.pids"
    schedule = _command(make_schedule, "ignores", IGNORES_TERM, env={"MARKS": marks})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    # a grace longer than the wait's deadline: only a kill at once ends the run in time
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=120) as log:
        wait_until(lambda: len(_pids(marks)) == 2, timeout=WAIT, what="the command to start", log_path=log)
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests", force=True)
        run = _final(run, log)
        left = _still_there(_pids(marks))
    assert (run.status, run.stop_kind) == (S.CANCELLED, "terminate")
    assert run.exit_code == -signal.SIGKILL
    assert AuditEntry.objects.filter(action="run.stop.terminate", target_id=str(run.pk)).count() == 1
    assert left == []


def test_a_cancel_in_its_grace_escalates_to_terminate_and_the_command_is_killed_at_once(make_schedule, tmp_path):
    marks = tmp_path / "ignore.pids"
    schedule = _command(make_schedule, "ignores", IGNORES_TERM, env={"MARKS": marks})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=120) as log:
        wait_until(lambda: len(_pids(marks)) == 2, timeout=WAIT, what="the command to start", log_path=log)
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests")
        wait_until(lambda: any(line.startswith("termed") for line in _lines(marks)), timeout=WAIT,
                   what="the command to get (and ignore) SIGTERM", log_path=log)
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests", force=True), "a cancel escalates"
        run = _final(run, log)
        left = _still_there(_pids(marks))
    assert (run.status, run.stop_kind, run.exit_code) == (S.CANCELLED, "terminate", -signal.SIGKILL)
    assert left == []


# --- 3. timeouts --------------------------------------------------------------------

def test_a_command_past_its_timeout_fails_timed_out(make_schedule, tmp_path):
    marks = tmp_path / "sleeps.pids"
    schedule = _command(make_schedule, "slow", SLEEPS, env={"MARKS": marks}, timeout_seconds=1)
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        run = _final(run, log)
    assert run.status == S.FAILED and run.attempt == 1
    assert run.reason.startswith("timed out after 1 s"), run.reason
    assert len(_lines(marks)) == 1 and _still_there([int(_lines(marks)[0].split()[2])]) == []


def test_a_timed_out_command_with_two_attempts_is_queued_again_once_then_fails(make_schedule, tmp_path):
    marks = tmp_path / "sleeps.pids"
    schedule = _command(make_schedule, "slow", SLEEPS, env={"MARKS": marks}, timeout_seconds=1,
                        retry_max_attempts=2, retry_initial_delay=0, retry_jitter=0)
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        run = _final(run, log)
    assert run.status == S.FAILED and run.attempt == 2
    assert run.reason.startswith("timed out after 1 s"), run.reason
    assert [line.split()[:2] for line in _lines(marks)] == [["attempt", "1"], ["attempt", "2"]]
    assert AuditEntry.objects.filter(action="run.retry", target_id=str(run.pk)).count() == 1
    assert _still_there([int(line.split()[2]) for line in _lines(marks)]) == []


# --- 4. Python pipelines ------------------------------------------------------------

def test_a_cooperative_python_pipeline_stops_at_its_next_check_and_its_worker_lives_on(make_schedule, tmp_path):
    pidfile = tmp_path / "worker.pid"
    schedule = make_schedule("coop", target_id="itest.cooperative")
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"pidfile": str(pidfile)})
    # a grace longer than the wait's deadline: the pipeline stopped by itself, not by force
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=120) as log:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=WAIT,
                             what="the pipeline to start", log_path=log))
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests")
        run = _final(run, log)
        assert pid_alive(pid), "the worker process was not ended"
    assert run.status == S.CANCELLED
    assert any(m.startswith("stopped (cancel)") for _, m in _log(run))
    assert run.worker_id.endswith(f":{pid}")


def test_a_python_pipeline_that_ignores_the_stop_loses_its_worker_and_the_reaper_ends_the_run(make_schedule, tmp_path):
    pidfile = tmp_path / "worker.pid"
    stubborn = make_schedule("stubborn", target_id="itest.stubborn")
    after = make_schedule("after", target_id="demo.noop")
    run = run_trigger_manual(schedule=stubborn, actor="tests", params={"pidfile": str(pidfile), "sleep": 120})
    # one worker: the following run can only execute in the worker django-q2 starts in place of the killed one
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=1, Q_WORKERS=1) as log:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=WAIT,
                             what="the pipeline to start", log_path=log))
        assert run_cancel(run=Run.objects.get(pk=run.pk), actor="tests")
        run = _final(run, log)  # well before ETL_STUCK_SECONDS (60): the reaper saw the worker gone
        assert not pid_alive(pid)
        following = _final(run_trigger_manual(schedule=after, actor="tests"), log)
    assert run.status == S.CANCELLED and run.stop_kind == "cancel"
    settled = AuditEntry.objects.get(action="run.stop.settled", target_id=str(run.pk))
    assert settled.actor == "reaper"
    assert any("did not stop within 1 s" in m for _, m in _log(run)), "the worker's last note before it was ended"
    assert following.status == S.SUCCEEDED, following.reason
    assert not following.worker_id.endswith(f":{pid}")


@pytest.mark.parametrize("grace", [1, 0])
def test_a_python_pipeline_that_ignores_its_timeout_loses_its_worker_and_fails_timed_out(
        make_schedule, tmp_path, grace):
    """With no grace the worker is ended on the supervisor's next look, maybe before a heartbeat wrote the
    timeout: the run must still end as timed out (by the reaper), not wait for governance to call it lost."""
    pidfile = tmp_path / "worker.pid"
    schedule = make_schedule("stubborn", target_id="itest.stubborn", timeout_seconds=1, retry_max_attempts=1)
    run = run_trigger_manual(schedule=schedule, actor="tests", params={"pidfile": str(pidfile), "sleep": 120})
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=grace) as log:
        pid = int(wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=WAIT,
                             what="the pipeline to start", log_path=log))
        run = _final(run, log)
        assert not pid_alive(pid)
    assert run.status == S.FAILED and run.attempt == 1
    assert run.reason.startswith("timed out after 1 s"), run.reason
    assert AuditEntry.objects.get(action="run.stop.settled", target_id=str(run.pk)).actor == "reaper"


# --- 5. a class limit counts processes really alive ----------------------------------------

def test_a_class_slot_is_free_only_once_the_stopped_commands_processes_are_dead(make_schedule, tmp_path):
    WorkloadClass.objects.create(name="solo", concurrency_limit=1)
    marks, record = tmp_path / "first.pids", tmp_path / "second.json"
    first = _command(make_schedule, "first", IGNORES_TERM, env={"MARKS": marks}, workload_class="solo")
    second = _command(make_schedule, "second", RECORD_START, env={"WATCH": marks, "RECORD": record},
                      workload_class="solo")
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=2) as log:
        a = run_trigger_manual(schedule=first, actor="tests")
        wait_until(lambda: len(_pids(marks)) == 2, timeout=WAIT, what="the first command to start", log_path=log)
        b = run_trigger_manual(schedule=second, actor="tests")  # waits for the class's one slot
        assert run_cancel(run=Run.objects.get(pk=a.pk), actor="tests")
        b = _final(b, log)
        a = Run.objects.get(pk=a.pk)
    assert (a.status, a.exit_code) == (S.CANCELLED, -signal.SIGKILL)
    assert any(line.startswith("termed") for line in _lines(marks)), "the first ignored SIGTERM for the grace"
    assert b.status == S.SUCCEEDED, b.reason
    seen = json.loads(record.read_text())
    assert sorted(seen["watched"]) == sorted(_pids(marks))
    assert seen["alive"] == [], "the second began while processes of the first were still there"


# --- 6. overlap: cancel_other and terminate_other ----------------------------------------

def test_cancel_other_stops_the_running_command_before_the_next_fire_starts(make_schedule, tmp_path):
    shared = tmp_path / "overlap.pids"
    schedule = _command(make_schedule, "every2", _overlapping(ignore_term=False), env={"SHARED": shared},
                        trigger_kind="interval", trigger_config={"seconds": 2}, overlap_policy="cancel_other")
    with cluster(tmp_path) as log:
        wait_until(lambda: sum(line.startswith("start") for line in _lines(shared)) >= 2, timeout=WAIT,
                   what="the second fire's command to start", log_path=log)
        lines = _lines(shared)
    a, b = [line.split()[1] for line in lines if line.startswith("start")][:2]
    assert lines[:3] == [f"start {a} alive=", f"end {a}", f"start {b} alive="], lines
    first = Run.objects.filter(schedule=schedule).order_by("id").first()
    assert first.status == S.CANCELLED and first.reason.startswith("overlap policy cancel_other: replaced by")


def test_terminate_other_kills_the_running_command_at_once_and_then_starts_the_next(make_schedule, tmp_path):
    shared = tmp_path / "overlap.pids"
    schedule = _command(make_schedule, "every2", _overlapping(ignore_term=True), env={"SHARED": shared},
                        trigger_kind="interval", trigger_config={"seconds": 2}, overlap_policy="terminate_other")
    # a grace longer than the wait's deadline: the next fire starts in time only if the old run was killed at once
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=120) as log:
        wait_until(lambda: sum(line.startswith("start") for line in _lines(shared)) >= 2, timeout=WAIT,
                   what="the second fire's command to start", log_path=log)
        lines = _lines(shared)
    starts = [line for line in lines if line.startswith("start")]
    assert [line.split()[2] for line in starts[:2]] == ["alive=", "alive="], lines
    assert not any(line.startswith("end") for line in lines)
    # the first run that started: on a loaded machine a fire may come before the one before it began, and is
    # replaced while still queued (nothing to kill)
    first = Run.objects.filter(schedule=schedule, started_at__isnull=False).order_by("id").first()
    assert (first.status, first.stop_kind, first.exit_code) == (S.CANCELLED, "terminate", -signal.SIGKILL)
    assert first.reason.startswith("overlap policy terminate_other: replaced by")


# --- 7. an error outside the pipeline ------------------------------------------------------

def test_a_window_that_cannot_be_computed_fails_the_run_at_once_with_the_real_error(make_schedule, tmp_path):
    schedule = make_schedule("overflow", target_id="demo.noop", retry_max_attempts=3, watermark_config={
        "type": "datetime", "column": "ts", "initial": "2026-01-01T00:00:00+00:00", "max_window": 2 * 86400})
    # every door refuses a mark this late now (docs/semantics.md, "Largest values"); a row stored before that rule:
    # mark + max_window is past the last datetime
    WatermarkState.objects.update_or_create(schedule=schedule, defaults={"value": "9999-12-31T00:00:00+00:00"})
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path) as log:
        run = _final(run, log)
    assert run.status == S.FAILED and run.attempt == 1
    assert run.reason.startswith("OverflowError"), run.reason
    assert "worker lost" not in run.reason
    assert not AuditEntry.objects.filter(action__startswith="run.worker_lost", target_id=str(run.pk)).exists()


# --- 8. a worker killed under a command ----------------------------------------------------

# attempt 1 starts a child and sleeps; attempt 2 records which of attempt 1's processes are still there, and ends
ATTEMPTS = PRELUDE + '''
MARKS = os.environ["MARKS"]
if os.environ["ETL_ATTEMPT"] == "1":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    note(MARKS, f"main {os.getpid()}")
    note(MARKS, f"child {child.pid}")
    time.sleep(300)
first = [int(line.split()[1]) for line in open(MARKS).read().splitlines()]
note(os.environ["RECORD"], json.dumps({"alive": [pid for pid in first if os.path.exists(f"/proc/{pid}")]}))
'''


def test_a_command_does_not_outlive_its_killed_worker_and_the_retry_never_runs_beside_it(make_schedule, tmp_path):
    marks, record = tmp_path / "first.pids", tmp_path / "retry.json"
    schedule = _command(make_schedule, "orphan", ATTEMPTS, env={"MARKS": marks, "RECORD": record}, retry_max_attempts=2)
    run = run_trigger_manual(schedule=schedule, actor="tests")
    with cluster(tmp_path, ETL_STUCK_SECONDS=3) as log:
        wait_until(lambda: len(_pids(marks)) == 2, timeout=WAIT, what="the command to start", log_path=log)
        worker = int(Run.objects.get(pk=run.pk).worker_id.rsplit(":", 1)[1])
        os.kill(worker, signal.SIGKILL)
        run = _final(run, log)
        left = _still_there(_pids(marks))
    assert run.status == S.SUCCEEDED and run.attempt == 2, run.reason
    assert json.loads(record.read_text())["alive"] == [], "the retry ran beside the first attempt's processes"
    assert left == []


# --- 9. fencing counts from what the worker last heard -----------------------------------------

def test_a_run_that_begins_on_a_worker_idle_longer_than_the_fence_time_is_not_fenced(make_schedule, tmp_path):
    """An idle worker writes no heartbeat; the claim of its next run is a write the database answered, so the fence
    (no heartbeat written for ETL_FENCE_SECONDS) counts from there, not from the last run's last beat."""
    quick = _command(make_schedule, "quick", "print('done')")
    slower = _command(make_schedule, "slower", "import time; time.sleep(1.5); print('done')")
    with cluster(tmp_path, ETL_FENCE_SECONDS=1, Q_WORKERS=1) as log:
        first = _final(run_trigger_manual(schedule=quick, actor="tests"), log)
        time.sleep(1.5)  # the worker idles longer than ETL_FENCE_SECONDS
        second = _final(run_trigger_manual(schedule=slower, actor="tests"), log)
    assert first.status == S.SUCCEEDED, first.reason
    assert second.status == S.SUCCEEDED and second.attempt == 1, second.reason
    assert not any("fenced" in message for _, message in _log(second))


def test_a_worker_ended_for_a_stubborn_run_of_a_batch_writes_the_ends_its_finished_runs_first(make_schedule, tmp_path):
    """Two runs in one broker message (one worker, a tick admitting two): the first finishes at once, its end waits
    for the batch's flush; the second ignores its cancel and its worker is ended. The first's success is written
    before that, so it is not re-queued as lost and run again."""
    record, pidfile = tmp_path / "record.txt", tmp_path / "worker.pid"
    quick = make_schedule("quick", target_id="itest.record", retry_max_attempts=2)
    stubborn = make_schedule("stubborn", target_id="itest.stubborn")
    first = run_trigger_manual(schedule=quick, actor="tests", params={"record": str(record)})
    second = run_trigger_manual(schedule=stubborn, actor="tests", params={"pidfile": str(pidfile), "sleep": 120})
    with cluster(tmp_path, ETL_CANCEL_GRACE_SECONDS=1, Q_WORKERS=1, ETL_STUCK_SECONDS=3,
                 ETL_BATCH_FLUSH_SECONDS=60) as log:
        wait_until(lambda: pidfile.exists() and pidfile.read_text(), timeout=WAIT, what="the stubborn run to start",
                   log_path=log)
        assert Run.objects.get(pk=first.pk).status == S.RUNNING, "the first's end waits for the batch's flush"
        assert run_cancel(run=Run.objects.get(pk=second.pk), actor="tests")
        second = _final(second, log)
        first = _final(first, log)
    assert second.status == S.CANCELLED
    assert (first.status, first.attempt) == (S.SUCCEEDED, 1), first.reason
    assert [line.split()[0] for line in _lines(record)] == ["start", "end"], "the first run executed once"
