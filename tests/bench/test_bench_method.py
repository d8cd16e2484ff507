"""How bench/run.py turns samples into figures and marks what a partial rerun carried over (no timing)."""
from __future__ import annotations

from bench.common import fmt
from bench.samples import aggregate, measured, merge_previous, spread, target_met


def _item(scenario, db, *rows, error=None):
    return {"scenario": scenario, "title": "t", "db": db, "error": error, "details": {"x": 1},
            "rows": [{"figure": f, "value": v, "unit": u, "target": t, "met": m, "db": db} for f, v, u, t, m in rows]}


def test_each_figure_is_the_median_of_its_samples_with_min_max_and_n():
    samples = [
        [_item(3, "sqlite", ("fire", 30.0, "ms", "<= 20 ms", False), ("queries", None, "6 -> 6", "constant", True))],
        [_item(3, "sqlite", ("fire", 12.0, "ms", "<= 20 ms", True), ("queries", None, "6 -> 6", "constant", True))],
        [_item(3, "sqlite", ("fire", 18.0, "ms", "<= 20 ms", True), ("queries", None, "6 -> 6", "constant", True))],
    ]
    (res,) = aggregate(samples)
    fire, queries = res["rows"]
    assert (fire["value"], fire["min"], fire["max"], fire["n"]) == (18.0, 12.0, 30.0, 3)
    assert fire["met"] is True  # judged on the median against the target, not on one sample
    assert queries["unit"] == "6 -> 6" and queries["met"] is True and queries["n"] == 3
    assert res["samples"] == 3 and len(res["details"]["samples"]) == 3
    assert spread(fire, fmt) == "(12.0-30.0, n=3)"


def test_a_failed_sample_is_left_out_and_an_all_failed_scenario_stays_an_error():
    ok = _item(8, "postgres", ("tick", 100.0, "ms", "<= 200 ms", True))
    failed = _item(8, "postgres", error="boom")
    (res,) = aggregate([[ok], [failed], [_item(8, "postgres", ("tick", 300.0, "ms", "<= 200 ms", False))]])
    assert res["rows"][0]["value"] == 200.0 and res["rows"][0]["n"] == 2 and res["sample_errors"] == ["boom"]
    assert aggregate([[failed], [failed]])[0]["error"] == "boom"


def test_targets_are_read_as_bounds_and_other_targets_are_not_judged_here():
    assert target_met("<= 20 ms", 20) is True and target_met(">= 80 %", 79.9) is False
    assert target_met("< 0.9 ms (Luigi)", 0.5) is True and target_met("<= 1,000 ms", 999) is True
    assert target_met("constant", 3) is None and target_met("", 3) is None


def test_a_partial_rerun_marks_its_rows_measured_now_and_carries_the_others_over_with_their_date():
    previous = {"when": "2026-12-02T17:36:48+00:00", "results": [
        _item(1, "sqlite", ("ratio", 29.0, "%", ">= 80 %", False)),
        _item(3, "sqlite", ("fire", 78.0, "ms", "<= 20 ms", False)),
        {**_item(5, "-", ("core", 0.2, "s", "<= 1 s", True)), "measured": "2026-11-30T09:00:00+00:00",
         "carried_over": True},
    ]}
    now = [_item(3, "sqlite", ("fire", 15.0, "ms", "<= 20 ms", True))]
    merged = merge_previous(now, previous, when="2026-12-03T10:00:00+00:00")
    by_scenario = {r["scenario"]: r for r in merged}
    assert [r["scenario"] for r in merged] == [1, 3, 5]
    assert by_scenario[3]["rows"][0]["value"] == 15.0 and measured(by_scenario[3]) == "this run"
    assert measured(by_scenario[1]) == "carried over from 2026-12-02 17:36 UTC"
    assert measured(by_scenario[5]) == "carried over from 2026-11-30 09:00 UTC"  # keeps its own date
    assert spread(by_scenario[1]["rows"][0], fmt) == "(1 sample)"
