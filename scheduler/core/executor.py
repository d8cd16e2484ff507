"""Runs a workflow: a DAG of pipelines in dependency order, one run each."""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from . import stop
from .dag import topological_order
from .errors import EtlError, own_words
from .ledger import Ledger, Outcome, RunRecord
from .pipeline import Pipeline

NodeHook = Callable[[str, str, "RunRecord | None"], None]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class RunReport:
    records: list[RunRecord] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    @property
    def resumed(self) -> list[str]:
        """Nodes that succeeded in an earlier attempt of the run and were not run again."""
        return [r.task_id for r in self.records if r.resumed]

    @property
    def ok(self) -> bool:
        return not self.blocked and all(r.outcome == Outcome.SUCCESS for r in self.records)

    @property
    def failed(self) -> list[str]:
        return [r.task_id for r in self.records if r.outcome == Outcome.FAILED]

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": [r.to_dict() for r in self.records],
            "skipped": list(self.skipped),
            "blocked": list(self.blocked),
            "resumed": self.resumed,
            "ok": self.ok,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunReport":
        return cls(
            records=[RunRecord.from_dict(r) for r in data.get("records", [])],
            skipped=list(data.get("skipped", [])),
            blocked=list(data.get("blocked", [])),
        )


def _reason(exc: BaseException) -> str:
    return own_words(exc)  # the cause's own words first (errors.py)


ERROR_CHARS = 8000  # a node's traceback keeps its end: the frame that raised and the message


def _traceback(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()[-ERROR_CHARS:]


class Executor:
    """Runs added pipelines once each, in dependency order.

    `sleep` is used for retry back-off in every pipeline; None keeps each
    pipeline's own. `on_node(event, task_id, record)` lets the app heartbeat:
    events are 'start', 'success', 'failed', 'skipped', 'blocked' and
    'resumed'. Every record goes to `ledger.append` as its node finishes, so a
    ledger that writes durably keeps what a killed worker had done.
    `done` holds the records of nodes that already succeeded for this run (an
    earlier attempt): they are not run again, their records are carried into
    the report marked `resumed`, and their downstreams run.
    """

    def __init__(
        self,
        ledger: Ledger,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], None] | None = None,
        on_node: NodeHook | None = None,
        done: Mapping[str, RunRecord] | None = None,
    ) -> None:
        self.ledger = ledger
        self.clock = clock or utc_now
        self.sleep = sleep
        self.on_node = on_node
        self.done = dict(done or {})
        self.pipelines: dict[str, Pipeline] = {}
        self.deps: list[tuple[str, str]] = []  # (upstream, task): task depends on upstream

    def add_pipeline(self, task_id: str, pipeline: Pipeline) -> None:
        if task_id in self.pipelines:
            raise EtlError(f"pipeline {task_id!r} is already added")
        self.pipelines[task_id] = pipeline

    def add_dep(self, task: str, depends_on: str) -> None:
        self.deps.append((depends_on, task))

    def _emit(self, event: str, task_id: str, record: RunRecord | None) -> None:
        if self.on_node is not None:
            self.on_node(event, task_id, record)

    def run(self) -> RunReport:
        # Validate the whole graph first: a cycle or a typo must fail before
        # any source is touched, never half-way through a workflow.
        for upstream, task in self.deps:
            for name in (task, upstream):
                if name not in self.pipelines:
                    raise EtlError(f"unknown pipeline {name!r} in dependency {task!r} -> {upstream!r}")
        order = topological_order(self.pipelines, self.deps)
        upstreams: dict[str, list[str]] = {}
        for upstream, task in self.deps:
            upstreams.setdefault(task, []).append(upstream)

        report = RunReport()
        failed: set[str] = set()
        blocked: set[str] = set()
        token = stop.current()
        for task_id in order:
            token.check()  # between nodes: a stopped run starts no further node
            # Gate one node at a time, as results arrive (same rule as dag.gate).
            if any(up in failed or up in blocked for up in upstreams.get(task_id, ())):
                blocked.add(task_id)
                report.blocked.append(task_id)
                self._emit("blocked", task_id, None)
                continue
            pipeline = self.pipelines[task_id]
            earlier = self.done.get(task_id)
            if earlier is not None and earlier.outcome == Outcome.SUCCESS:
                record = replace(earlier, resumed=True)
                self.ledger.append(record)
                report.records.append(record)
                self._emit("resumed", task_id, record)
                continue
            if self._fresh(task_id, pipeline):
                report.skipped.append(task_id)
                self._emit("skipped", task_id, None)
                continue
            record = self._run_one(task_id, pipeline)
            self.ledger.append(record)
            report.records.append(record)
            if record.outcome == Outcome.FAILED:
                failed.add(task_id)
                self._emit("failed", task_id, record)
            else:
                self._emit("success", task_id, record)
        return report

    def _fresh(self, task_id: str, pipeline: Pipeline) -> bool:
        if not pipeline.refresh_after:
            return False
        last = self.ledger.last_success(task_id)
        if last is None:
            return False
        return self.clock() - last.finished_at < pipeline.refresh_after

    def _run_one(self, task_id: str, pipeline: Pipeline) -> RunRecord:
        started = self.clock()
        self._emit("start", task_id, None)
        tries = [1]
        hook = pipeline.on_retry

        def count(attempt: int, exc: BaseException, wait: float) -> None:
            if hook is not None:
                hook(attempt, exc, wait)  # may raise to stop retrying: then no further try
            tries[0] += 1

        pipeline.on_retry = count
        try:
            with stop.current().node_timeout(task_id, pipeline.timeout_seconds):
                result = pipeline.run(sleep=self.sleep)
        except Exception as exc:  # any pipeline error is a recorded failure, not a crash
            return RunRecord(task_id, Outcome.FAILED, started, self.clock(), reason=_reason(exc), attempts=tries[0],
                             error=_traceback(exc))
        finally:
            pipeline.on_retry = hook
        return RunRecord(
            task_id, Outcome.SUCCESS, started, self.clock(), rows=result.rows, watermark=result.max_value,
            attempts=tries[0],
        )
