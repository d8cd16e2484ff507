"""Overlap and catch-up decisions, pure: what each fire becomes."""
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core import ActiveRun, decide_catchup, decide_overlap

T = [datetime(2026, 3, 2, 12, m, tzinfo=UTC) for m in (0, 5, 10)]
RUNNING = [ActiveRun(7, "RUNNING")]


def kinds(decision):
    return ["skip" if f.skip_reason else "run" for f in decision.fires]


def test_with_nothing_active_every_policy_runs_the_fire():
    for policy in ("skip", "buffer_one", "buffer_all", "cancel_other", "allow_all"):
        decision = decide_overlap(policy, [], T[:1])
        assert kinds(decision) == ["run"] and decision.cancel == []


def test_skip_turns_a_fire_while_a_run_is_active_into_a_skipped_run_naming_it():
    decision = decide_overlap("skip", RUNNING, T[:1])
    assert decision.fires[0].skip_reason == "overlap policy skip: run 7 is still RUNNING"


def test_skip_in_a_catch_up_batch_runs_the_first_and_skips_the_rest():
    decision = decide_overlap("skip", [], T)
    assert kinds(decision) == ["run", "skip", "skip"]
    assert decision.fires[1].skip_reason == "overlap policy skip: the run for 2026-03-02 12:00:00 UTC is still QUEUED"


def test_buffer_one_queues_one_behind_the_active_run_and_skips_more():
    decision = decide_overlap("buffer_one", RUNNING, T)
    assert kinds(decision) == ["run", "skip", "skip"]
    assert decision.fires[1].skip_reason == (
        "overlap policy buffer_one: run 7 is still RUNNING and the run for 2026-03-02 12:00:00 UTC already waits "
        "its turn"
    )
    assert kinds(decide_overlap("buffer_one", [ActiveRun(7, "RUNNING"), ActiveRun(8, "QUEUED")], T[:1])) == ["skip"]


def test_buffer_all_and_allow_all_queue_every_fire():
    assert kinds(decide_overlap("buffer_all", RUNNING, T)) == ["run"] * 3
    assert kinds(decide_overlap("allow_all", RUNNING, T)) == ["run"] * 3


def test_cancel_other_cancels_the_active_runs_and_only_the_latest_fire_runs():
    decision = decide_overlap("cancel_other", [ActiveRun(7, "RUNNING"), ActiveRun(8, "QUEUED")], T)
    assert decision.cancel == [7, 8]
    assert decision.cancel_reason == "overlap policy cancel_other: replaced by the fire at 2026-03-02 12:10:00 UTC"
    assert kinds(decision) == ["skip", "skip", "run"]


def test_an_unknown_policy_is_a_programming_error():
    with pytest.raises(ValueError):
        decide_overlap("sometimes", [], T)


GRACE = timedelta(seconds=60)


def test_catch_up_latest_and_all_run_what_they_are_given():
    now = T[-1] + timedelta(hours=1)
    assert [f.at for f in decide_catchup("latest", T[-1:], now=now, grace=GRACE)] == T[-1:]
    assert [(f.at, f.skip_reason) for f in decide_catchup("all", T, now=now, grace=GRACE)] == [(t, "") for t in T]


def test_catch_up_none_runs_an_on_time_fire_and_records_a_missed_one_as_skipped():
    assert decide_catchup("none", T[-1:], now=T[-1] + timedelta(seconds=5), grace=GRACE)[0].skip_reason == ""
    [missed] = decide_catchup("none", T[-1:], now=T[-1] + timedelta(hours=2), grace=GRACE, first=T[0])
    assert missed.at == T[-1]
    assert missed.skip_reason == (
        "catch-up policy none: the fire at 2026-03-02 12:10:00 UTC was missed (and every fire "
        "since 2026-03-02 12:00:00 UTC); no run, the schedule goes on at its next fire"
    )


def test_terminate_other_is_cancel_other_without_the_grace():
    decision = decide_overlap("terminate_other", [ActiveRun(7, "RUNNING")], T)
    assert decision.cancel == [7] and decision.force
    assert decision.cancel_reason.startswith("overlap policy terminate_other: replaced by the fire at")
    assert not decide_overlap("cancel_other", [ActiveRun(7, "RUNNING")], T).force
