"""The soak's class-limit check reads the runs' own start/end times, so a brief excess cannot hide between samples."""
from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta, timezone
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("soak", Path(__file__).resolve().parents[2] / "scripts" / "soak.py")
soak = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(soak)
T0 = datetime(2026, 3, 2, 12, tzinfo=timezone.utc)


def at(ms: int) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def test_a_brief_overlap_between_two_samples_is_counted():
    # three runs overlap for 50 ms only: a sampler every 500 ms would most likely see two at most
    runs = [(at(0), at(400)), (at(300), at(700)), (at(350), at(360)), (at(800), None)]
    assert soak.max_overlap(runs) == 3


def test_a_run_starting_as_another_ends_does_not_overlap_it():
    assert soak.max_overlap([(at(0), at(100)), (at(100), at(200)), (at(200), at(300))]) == 1


def test_runs_still_open_count_until_the_end():
    assert soak.max_overlap([(at(0), None), (at(10), None), (at(20), at(30))]) == 3
