"""The timing rules between a worker's threads and governance are constants a test checks (core/timing.py)."""
from __future__ import annotations

from scheduler.core.timing import (
    LAST_WORDS_SECONDS,
    SHUTDOWN_KILL_SECONDS,
    STOP_POLL_SECONDS,
    SUPERVISOR_TICK,
    fence_grace,
    shutdown_bound,
    timing_problems,
)


def test_the_defaults_keep_every_rule():
    # ETL_HEARTBEAT_SECONDS 5, ETL_STUCK_SECONDS 60, ETL_FENCE_SECONDS 45, ETL_CANCEL_GRACE_SECONDS 30
    assert timing_problems(fence=45, stuck=60, grace=30) == []
    assert SUPERVISOR_TICK < STOP_POLL_SECONDS


def test_the_fence_comes_before_governance_may_call_a_run_lost():
    assert timing_problems(fence=60, stuck=60, grace=30)[0].startswith("ETL_FENCE_SECONDS: must be less than")
    assert timing_problems(fence=61, stuck=60, grace=30)


def test_a_fenced_runs_grace_ends_inside_the_gap():
    for fence, stuck, grace in [(45, 60, 30), (1, 2, 30), (30, 60, 0), (59.5, 60, 30)]:
        gap = stuck - fence
        assert fence_grace(grace=grace, fence=fence, stuck=stuck) <= gap / 2
    assert fence_grace(grace=3, fence=10, stuck=60) == 3  # the cancel grace, when it fits


def test_the_settings_refuse_a_configuration_that_breaks_a_rule(monkeypatch):
    problems = timing_problems(fence=10, stuck=10, grace=30)
    assert len(problems) == 1 and "ETL_STUCK_SECONDS (10)" in problems[0]


def test_a_stopping_cluster_kills_its_tree_only_after_its_workers_could_stop_their_runs():
    # the request is read within a poll, the supervisor kills past the cancel grace (a tick late at most), and a
    # worker ending a stubborn pipeline may spend its last words: all before the cluster's own kill
    assert SHUTDOWN_KILL_SECONDS > STOP_POLL_SECONDS + SUPERVISOR_TICK + LAST_WORDS_SECONDS
    assert shutdown_bound(grace=2, cancel_grace=1) == 3 + SHUTDOWN_KILL_SECONDS
    assert shutdown_bound(grace=30, cancel_grace=30) < 90, "within systemd's default TimeoutStopSec"
