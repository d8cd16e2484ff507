"""What a pipeline factory is told about the run it builds a pipeline for."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.core import LineageDataset, Window, stop


@dataclass(frozen=True)
class RunContext:
    run_id: int | None
    schedule: str
    window: Window | None = None
    params: dict[str, Any] = field(default_factory=dict)
    logical_time: datetime | None = None
    attempt: int = 1
    watermark_column: str | None = None
    # the backfill's id when this run replays a backfill window, else None:
    # `if ctx.backfill:` tells a backfill from a live run
    backfill: int | None = None
    # datasets declared at run time for OpenLineage (declare_input / declare_output)
    lineage_inputs: list[LineageDataset] = field(default_factory=list, repr=False, compare=False)
    lineage_outputs: list[LineageDataset] = field(default_factory=list, repr=False, compare=False)

    def declare_input(self, namespace: str, name: str) -> LineageDataset:
        """Report a dataset this run reads (OpenLineage naming: docs/lineage.md); returns it."""
        dataset = LineageDataset(namespace, name)
        self.lineage_inputs.append(dataset)
        return dataset

    def declare_output(self, namespace: str, name: str) -> LineageDataset:
        """Report a dataset this run writes (OpenLineage naming: docs/lineage.md); returns it."""
        dataset = LineageDataset(namespace, name)
        self.lineage_outputs.append(dataset)
        return dataset

    def cancelled(self) -> bool:
        """True once the run was asked to stop (a cancel, its timeout): finish the batch at hand and return."""
        return stop.cancelled()

    def check_cancelled(self) -> None:
        """Raise RunStopped when the run was asked to stop; call it between batches of work."""
        stop.check()
