"""POST /api/v1/backfills with `reprocess` ("all" by default, or "failed": only windows without a succeeded run)
and `newest_first`, for the create and the preview (issue 23, point 7)."""
import pytest
from django.utils import timezone

from scheduler.models import Backfill, BackfillWindow, Run, RunStatus, Schedule, TriggerKind
from tests.api.conftest import problem_of

WM = {"type": "datetime", "column": "updated_at", "initial": "2026-01-01T00:00:00+00:00"}
BODY = {"schedule": "orders", "from": "2026-01-01T00:00:00+00:00", "to": "2026-01-04T00:00:00+00:00",
        "window": 86400, "reason": "replay"}


@pytest.fixture
def orders(make_schedule) -> Schedule:
    schedule = make_schedule("orders", watermark_config=WM)
    # the first day succeeded; the second failed; the third never ran
    for status, low, high in [(RunStatus.SUCCEEDED, "01", "02"), (RunStatus.FAILED, "02", "03")]:
        Run.objects.create(schedule=schedule, trigger_key=f"t{low}", trigger_kind=TriggerKind.MANUAL,
                           workload_class=schedule.workload_class, status=status, queued_at=timezone.now(),
                           finished_at=timezone.now(), window_low=f"2026-01-{low}T00:00:00+00:00",
                           window_high=f"2026-01-{high}T00:00:00+00:00")
    return schedule


def test_the_preview_counts_only_failed_and_missing_windows(api, op_token, orders):
    r = api.post("/backfills", {**BODY, "reprocess": "failed", "preview": True}, token=op_token)
    assert r.status_code == 200, r.content
    assert (r.json()["windows"], r.json()["already_succeeded"]) == (2, 1)
    assert r.json()["first"][0].startswith("2026-01-02")
    r = api.post("/backfills", {**BODY, "preview": True}, token=op_token)
    assert (r.json()["windows"], r.json()["already_succeeded"]) == (3, 0)
    assert not Backfill.objects.exists()


def test_create_with_reprocess_failed_makes_only_those_windows(api, op_token, orders):
    r = api.post("/backfills", {**BODY, "reprocess": "failed"}, token=op_token)
    assert r.status_code == 201, r.content
    assert r.json()["total_windows"] == 2
    lows = sorted(BackfillWindow.objects.values_list("low", flat=True))
    assert [low[:10] for low in lows] == ["2026-01-02", "2026-01-03"]


@pytest.mark.parametrize("preview", [True, False])
@pytest.mark.parametrize("value", ["some", "", 3])
def test_a_bad_reprocess_is_refused_naming_the_field(api, op_token, orders, value, preview):
    bad = problem_of(api.post("/backfills", {**BODY, "reprocess": value, "preview": preview}, token=op_token), 422)
    assert any("reprocess" in str(e.get("field", "")) for e in bad["errors"]), bad
    assert not Backfill.objects.exists()


def test_newest_first_queues_the_latest_window_first_and_says_so(api, op_token, orders):
    r = api.post("/backfills", {**BODY, "newest_first": True}, token=op_token)
    assert r.status_code == 201, r.content
    assert r.json()["newest_first"] is True
    assert Backfill.objects.get().newest_first is True
    assert api.post("/backfills", BODY, token=op_token).json()["newest_first"] is False


@pytest.mark.parametrize("value", ["yes", 3, None])
def test_a_bad_newest_first_is_refused_naming_the_field(api, op_token, orders, value):
    bad = problem_of(api.post("/backfills", {**BODY, "newest_first": value}, token=op_token), 422)
    assert any("newest_first" in str(e.get("field", "")) for e in bad["errors"]), bad
    assert not Backfill.objects.exists()
