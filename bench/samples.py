"""How the suite turns repeated scenario runs into figures, and keeps track of when each was measured.

Every scenario runs as several independent samples (a fresh process and a
fresh scratch database each, `bench/run.py --samples`, 3 by default). Each
row's figure is the median of its samples, stored with the spread (min and
max) and the number of samples. A partial rerun (`--only`) replaces the rows
it measured and carries the others over from the previous results file,
each marked with the date it was measured.

Pure functions over the result dicts (no Django), so tests drive them directly.
"""
from __future__ import annotations

import copy
import operator
import re
import statistics
from typing import Any

_TARGET = re.compile(r"^\s*(<=|>=|<|>)\s*([0-9][0-9,]*(?:\.[0-9]+)?)")
_COMPARE = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def target_met(target: str, value: float) -> bool | None:
    """'<= 20 ms' against a value: True/False; None when the target is not a bound ('constant', '')."""
    match = _TARGET.match(target or "")
    if match is None:
        return None
    return _COMPARE[match.group(1)](value, float(match.group(2).replace(",", "")))


def aggregate(samples: list[list[dict]]) -> list[dict]:
    """One result per scenario item: each row's value the median of the samples, with min, max and n.

    `samples` holds what each run of the scenario emitted (a list of result
    dicts, one per database or part). Items and rows are matched by
    position: the same code emits them in the same order. A sample that
    failed counts as missing; the item is an error only when every sample failed.
    """
    out: list[dict] = []
    for i in range(max((len(s) for s in samples), default=0)):
        items = [s[i] for s in samples if i < len(s)]
        ok = [item for item in items if not item.get("error")]
        if not ok:
            out.append(copy.deepcopy(items[0]))
            continue
        merged = copy.deepcopy(ok[0])
        merged["samples"] = len(ok)
        merged["details"] = {"samples": [item.get("details", {}) for item in ok]}
        merged["elapsed_s"] = sum(item.get("elapsed_s", 0) for item in items)
        failed = [item["error"] for item in items if item.get("error")]
        if failed:
            merged["sample_errors"] = failed
        for j, row in enumerate(merged["rows"]):
            rows = [item["rows"][j] for item in ok if j < len(item["rows"])]
            values = [r["value"] for r in rows if _number(r["value"])]
            if values:
                row["value"] = statistics.median(values)
                row["min"], row["max"], row["n"] = min(values), max(values), len(values)
                bound = target_met(row.get("target", ""), row["value"])
                row["met"] = bound if bound is not None else _all_met(rows)
            else:
                units = list(dict.fromkeys(r["unit"] for r in rows))
                row["unit"] = " | ".join(units)  # e.g. "6 -> 6" queries; samples that differ all show
                row["n"] = len(rows)
                row["met"] = _all_met(rows)
        out.append(merged)
    return out


def _all_met(rows: list[dict]) -> bool | None:
    mets = [r.get("met") for r in rows if r.get("met") is not None]
    return all(mets) if mets else None


def merge_previous(results: list[dict], previous: dict | None, *, when: str) -> list[dict]:
    """This run's results, marked measured `when`, plus the previous run's others marked carried over."""
    for res in results:
        res["measured"], res["carried_over"] = when, False
    if not previous:
        return results
    redone = {(r["scenario"], r["db"]) for r in results}
    kept = []
    for res in previous.get("results", []):
        if (res["scenario"], res["db"]) in redone:
            continue
        res = copy.deepcopy(res)
        res["measured"] = res.get("measured") or previous.get("when", "unknown")
        res["carried_over"] = True
        kept.append(res)
    return sorted(kept + results, key=lambda r: (r["scenario"], r["db"] != "sqlite"))


def spread(row: dict, fmt) -> str:
    """'(min-max, n=3)' for a row with samples, '(1 sample)' for one without a spread recorded."""
    if "min" in row and row.get("n", 0) > 1:
        return f"({fmt(row['min'], row['unit'])}-{fmt(row['max'], row['unit'])}, n={row['n']})"
    if row.get("value") is None:
        return f"(n={row['n']})" if row.get("n", 0) > 1 else ""
    return "(1 sample)"


def measured(res: dict) -> str:
    """'this run' or 'carried over from 2026-12-02 17:36 UTC'."""
    if not res.get("carried_over"):
        return "this run"
    when = str(res.get("measured", "unknown"))
    return f"carried over from {when[:16].replace('T', ' ')} UTC" if when[:4].isdigit() else f"carried over ({when})"


__all__ = ["aggregate", "measured", "merge_previous", "spread", "target_met"]
