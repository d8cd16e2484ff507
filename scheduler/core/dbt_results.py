"""dbt's artifacts read into the scheduler's terms: run_results.json into node outcomes, a summary, a re-run selector.

Pure: takes the decoded JSON, touches neither Django nor the file system.
dbt's statuses (dbt-core 1.10, `run_results.json` v6): models, seeds and
snapshots end `success`, `error` or `skipped`; tests `pass`, `warn`, `fail`,
`error` or `skipped`; `no-op` for a node with nothing to do.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Mapping

#: the resource types that become node records (operations, hooks and the like do not)
NODE_TYPES = ("model", "seed", "snapshot", "test", "unit_test")
SUCCESS, FAILED, SKIPPED = "SUCCESS", "FAILED", "SKIPPED"
FAILED_STATUSES = frozenset({"error", "fail", "runtime error"})
SKIPPED_STATUSES = frozenset({"skipped"})


@dataclass(frozen=True)
class DbtNode:
    unique_id: str           # model.analytics.orders, test.analytics.not_null_orders_id.6bd2c50f02
    resource_type: str       # model, seed, snapshot, test, unit_test
    name: str                # dbt's name: orders, not_null_orders_id; a unit test's orders::test_orders_count
    status: str              # dbt's own word
    outcome: str             # SUCCESS, FAILED or SKIPPED
    started_at: datetime | None
    finished_at: datetime | None
    rows: int | None         # adapter_response.rows_affected, when the adapter reports it
    message: str

    @property
    def short(self) -> str:
        return f"{self.resource_type}.{self.name}"


def outcome_of(status: str) -> str:
    status = (status or "").lower()
    if status in FAILED_STATUSES:
        return FAILED
    if status in SKIPPED_STATUSES:
        return SKIPPED
    return SUCCESS  # success, pass, warn (reported in the message), no-op


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _span(timing: Any) -> tuple[datetime | None, datetime | None]:
    """The node's first start and last completion over its steps (compile, execute)."""
    starts, ends = [], []
    for step in timing if isinstance(timing, list) else []:
        if isinstance(step, Mapping):
            if (start := _when(step.get("started_at"))) is not None:
                starts.append(start)
            if (end := _when(step.get("completed_at"))) is not None:
                ends.append(end)
    return (min(starts) if starts else None), (max(ends) if ends else None)


def node_name(unique_id: str) -> str:
    """The name dbt shows: a node's name, and for a unit test `<model>::<test>` (`unit_test.<project>.<model>.<test>`),
    as dbt's own log writes it."""
    parts = unique_id.split(".")
    if parts[0] == "unit_test" and len(parts) >= 4:
        return f"{parts[2]}::{parts[-1]}"
    return parts[2] if len(parts) >= 3 else parts[-1]


def _selector(unique_id: str) -> str:
    """What `--select` names the node by: a unit test by dbt's `unit_test:<project>.<test>` method (its name alone
    would select its model); anything else by its name with `+`, so its children are built again too."""
    parts = unique_id.split(".")
    if parts[0] == "unit_test" and len(parts) >= 4:
        return f"unit_test:{parts[1]}.{parts[-1]}"
    return f"{node_name(unique_id)}+"


def parse_run_results(data: Any) -> list[DbtNode]:
    """The nodes of a `run_results.json`, in dbt's order, of the types in NODE_TYPES."""
    results = data.get("results") if isinstance(data, Mapping) else None
    if not isinstance(results, list):
        raise ValueError("run_results.json has no results list")
    nodes: list[DbtNode] = []
    for item in results:
        if not isinstance(item, Mapping) or not isinstance(item.get("unique_id"), str):
            continue
        unique_id = item["unique_id"]
        kind = unique_id.split(".", 1)[0]
        if kind not in NODE_TYPES:
            continue
        status = str(item.get("status") or "")
        started, finished = _span(item.get("timing"))
        response = item.get("adapter_response")
        rows = response.get("rows_affected") if isinstance(response, Mapping) else None
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            rows = None
        message = item.get("message")
        outcome = outcome_of(status)
        if outcome == SUCCESS and status.lower() == "warn":
            message = f"warn: {message}" if message else "warn"
        elif outcome == FAILED and not message:
            failures = item.get("failures")
            message = f"{status}: {failures} failing row(s)" if failures else status
        elif outcome == SKIPPED and not message:
            message = "skipped: something upstream failed"
        nodes.append(DbtNode(unique_id=unique_id, resource_type=kind, name=node_name(unique_id), status=status,
                             outcome=outcome, started_at=started, finished_at=finished, rows=rows,
                             message=str(message or "").strip()))
    return nodes


def failure_summary(nodes: Iterable[DbtNode], *, limit: int = 5) -> str:
    """`2 of 9 failed: model.orders, test.not_null_orders_id (3 skipped)`."""
    nodes = list(nodes)
    failed = [n for n in nodes if n.outcome == FAILED]
    skipped = sum(1 for n in nodes if n.outcome == SKIPPED)
    names = ", ".join(n.short for n in failed[:limit]) + (f" and {len(failed) - limit} more" if len(failed) > limit
                                                           else "")
    text = f"{len(failed)} of {len(nodes)} failed" + (f": {names}" if names else "")
    return text + (f" ({skipped} skipped)" if skipped else "")


def rerun_selector(previous: Iterable[tuple[str, str]], *, within: Iterable[str] = ()) -> list[str]:
    """`--select` items that re-run what failed or was skipped, and everything downstream of it.

    `previous` is (unique_id, outcome) of the run being re-run. Each failed or
    skipped node is selected by name with `+` (its children); a test's name is
    unique, and so is a model's within a project; a unit test by its own
    selector (`unit_test:<project>.<test>`). `within` is the run's own
    selection (the schedule's `select` words): each item is intersected with
    each of them (`orders+,tag:daily`), so a child the run did not select is
    not built by its re-run, as `dbt retry` would not.
    """
    seen: dict[str, None] = {}
    scope = list(within)
    for unique_id, outcome in previous:
        if outcome in (FAILED, SKIPPED):
            for word in scope or [""]:
                seen.setdefault(_selector(unique_id) + (f",{word}" if word else ""))
    return list(seen)


def manifest_edges(manifest: Any, ids: Iterable[str]) -> list[tuple[str, str]]:
    """(upstream, downstream) among `ids`, from manifest.json's depends_on (for the run page's graph)."""
    wanted = set(ids)
    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("nodes"), Mapping):
        return []
    units = manifest.get("unit_tests")
    nodes = {**manifest["nodes"], **(units if isinstance(units, Mapping) else {})}  # a unit test depends on its model
    edges = []
    for uid in sorted(wanted):
        node = nodes.get(uid)
        depends = node.get("depends_on", {}).get("nodes", []) if isinstance(node, Mapping) else []
        for upstream in depends if isinstance(depends, list) else []:
            if upstream in wanted:
                edges.append((upstream, uid))
    return edges


# a line dbt starts a log event with (its time, `04:00:15  `); an event's further lines have none
_EVENT = re.compile(r"^\d{2}:\d{2}:\d{2}(?:\.\d+)?\s")
_SUMMARY = ("[DeprecationsSummary]", "Summary of encountered deprecations")


def dbt_error(output: str) -> str:
    """dbt's own words for the error it stopped on (exit 2: it could not parse or compile the project), on one line.

    The lines of its last "Encountered an error:" event and no more: what dbt logs after it (since dbt 1.10 a
    summary of the deprecations it met) is no part of the error. Without that event, the last lines before any
    such summary.
    """
    lines = [line.rstrip() for line in output.splitlines()]
    for i in range(len(lines) - 1, -1, -1):
        _, found, rest = lines[i].partition("Encountered an error")
        if not found:
            continue
        words = [rest.lstrip(":").strip()]
        for line in lines[i + 1:]:
            if _EVENT.match(line):
                break
            words.append(line.strip())
        text = " ".join(w for w in words if w)
        if text:
            return text
    before = next((i for i, line in enumerate(lines) if any(mark in line for mark in _SUMMARY)), len(lines))
    return " ".join(_EVENT.sub("", line).strip() for line in lines[:before][-5:] if line.strip()) or "no output"


def shorten(text: str, limit: int) -> str:
    """`text` on one line in at most `limit` characters: cut after a whole word, with "…", when it is longer."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    if text[limit - 1] != " " and " " in cut:  # the cut falls inside a word: end before that word
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "…"


__all__ = ["DbtNode", "dbt_error", "failure_summary", "manifest_edges", "node_name", "outcome_of",
           "parse_run_results", "rerun_selector", "selection_words", "shorten"]


def selection_words(selection: str | list[str] | None) -> list[str]:
    items = selection if isinstance(selection, list) else [selection or ""]
    return [word for item in items for word in item.split()]
