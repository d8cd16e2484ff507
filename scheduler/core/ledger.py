"""The record of every node a workflow ran, and where it is kept."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping, Protocol, runtime_checkable


class Outcome(str, enum.Enum):
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse(value: str | datetime | None) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


def _json_value(value: Any) -> Any:
    # Watermarks are datetimes or ints; tag datetimes so they round-trip.
    if isinstance(value, datetime):
        return {"datetime": value.isoformat()}
    return value


def _from_json_value(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"datetime"}:
        return datetime.fromisoformat(value["datetime"])
    return value


@dataclass
class RunRecord:
    task_id: str
    outcome: Outcome
    started_at: datetime
    finished_at: datetime
    rows: int = 0
    watermark: Any = None
    reason: str = ""
    attempts: int = 1  # tries of the node under its retry policy
    resumed: bool = False  # succeeded in an earlier attempt of the run; not run again
    # a failed node's traceback: kept in its node record, not in the run's report (which stays small);
    # diagnostic text, so two records of the same outcome are equal with or without it
    error: str = field(default="", compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "outcome": Outcome(self.outcome).value,
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "rows": self.rows,
            "watermark": _json_value(self.watermark),
            "reason": self.reason,
            "attempts": self.attempts,
            "resumed": self.resumed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunRecord":
        return cls(
            task_id=data["task_id"],
            outcome=Outcome(data["outcome"]),
            started_at=_parse(data["started_at"]),  # type: ignore[arg-type]
            finished_at=_parse(data["finished_at"]),  # type: ignore[arg-type]
            rows=int(data.get("rows", 0)),
            watermark=_from_json_value(data.get("watermark")),
            reason=data.get("reason", ""),
            attempts=int(data.get("attempts", 1)),
            resumed=bool(data.get("resumed", False)),
            error=str(data.get("error", "")),
        )


@runtime_checkable
class Ledger(Protocol):
    def append(self, record: RunRecord) -> None: ...

    def last_success(self, task_id: str) -> RunRecord | None: ...


class MemoryLedger:
    """In-process ledger for tests and the pure executor."""

    def __init__(self) -> None:
        self.records: list[RunRecord] = []
        self._last_success: dict[str, RunRecord] = {}

    def append(self, record: RunRecord) -> None:
        self.records.append(record)
        if record.outcome == Outcome.SUCCESS:
            prev = self._last_success.get(record.task_id)
            if prev is None or record.finished_at >= prev.finished_at:
                self._last_success[record.task_id] = record

    def last_success(self, task_id: str) -> RunRecord | None:
        return self._last_success.get(task_id)

    def for_task(self, task_id: str) -> list[RunRecord]:
        return [r for r in self.records if r.task_id == task_id]
