"""The table of bench/scale.py: each figure at a small and a large history, their ratio, and the targets of issue 25.

Pure functions over the results JSON (no Django), so tests drive them directly.

Targets: a time at the large size <= 1.2x the same time at the small one; a page <= 100 KB of HTML at any size;
a page's p95 <= 100 ms on PostgreSQL (at 10M runs); a dispatch tick <= 100 ms during a prune of 1M runs.
"""
from __future__ import annotations

from typing import Any

RATIO = 1.2
PAGE_KB = 100
PAGE_P95_MS = 100


def _rows(report: dict) -> dict[str, dict]:
    return {row["figure"]: row for part in ("results", "prune") for res in report.get(part, [])
            if not res.get("error") for row in res["rows"]}


def _spread(row: dict) -> str:
    if row.get("n", 0) > 1 and "min" in row:
        return f"{_num(row['min'])}-{_num(row['max'])}"
    return ""


def _num(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"
    return f"{value:,}"


def verdict(figure: str, unit: str, small: float | None, large: float | None, db: str,
            small_max: float | None = None) -> tuple[str, list[str]]:
    """(ratio text, the targets missed) of one figure.

    A time over the ratio that still lies inside the small size's own spread across samples (its max) is the
    machine's noise, not growth: the ratio shows it, with "(in spread)", and it does not count as missed.
    """
    missed = []
    ratio = ""
    if small and large is not None and unit in ("ms", "queries", "KB"):
        r = large / small
        ratio = f"{r:.2f}x"
        if unit == "ms" and r > RATIO and "prune" not in figure:
            if small_max is not None and large <= small_max:
                ratio += " (in spread)"
            else:
                missed.append(f"ratio > {RATIO}x")
    if unit == "KB" and large is not None and large > PAGE_KB:
        missed.append(f"> {PAGE_KB} KB")
    is_page = unit == "ms" and "tick" not in figure and "prune" not in figure
    if db == "postgres" and is_page and figure.endswith("p95") and large is not None and large > PAGE_P95_MS:
        missed.append(f"p95 > {PAGE_P95_MS} ms")
    if "tick" in figure and "prune" in figure and large is not None and large > PAGE_P95_MS:
        missed.append(f"> {PAGE_P95_MS} ms")
    return ratio, missed


def compare(small: dict, large: dict) -> list[dict]:
    """One row per figure of the large report, with the small report's value beside it."""
    a, b = _rows(small), _rows(large)
    out = []
    for figure, row in b.items():
        other = a.get(figure, {})
        ratio, missed = verdict(figure, row["unit"], other.get("value"), row.get("value"), large.get("db", ""),
                                small_max=other.get("max") if other.get("n", 0) > 1 else None)
        checked = row["unit"] in ("ms", "KB") and ("prune" not in figure or "tick" in figure)
        out.append({"figure": figure, "unit": row["unit"], "small": other.get("value"), "small_spread": _spread(other),
                    "large": row.get("value"), "large_spread": _spread(row), "ratio": ratio,
                    "met": None if not checked else not missed, "missed": missed})
    return out


def table(rows: list[dict], small_label: str = "small", large_label: str = "large") -> str:
    """A markdown table of `compare`'s rows."""
    lines = [f"| figure | {small_label} | {large_label} | ratio | target |", "|---|---:|---:|---:|---|"]
    for r in rows:
        small = f"{_num(r['small'])} {r['unit']}" + (f" ({r['small_spread']})" if r["small_spread"] else "")
        large = f"{_num(r['large'])} {r['unit']}" + (f" ({r['large_spread']})" if r["large_spread"] else "")
        met = {None: "", True: "met"}.get(r["met"], "MISSED: " + ", ".join(r["missed"]))
        lines.append(f"| {r['figure']} | {small} | {large} | {r['ratio']} | {met} |")
    return "\n".join(lines)


__all__ = ["compare", "table", "verdict"]
