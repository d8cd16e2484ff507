"""Workflows of N no-op pipelines, as a chain and as a fan-out, for scenario 4 and the peers."""
from __future__ import annotations


def noop_factory(ctx):
    from scheduler.core import IdentityTransform, Pipeline
    from scheduler.pipelines.noop import NoopSink, NoopSource

    return Pipeline(NoopSource(), IdentityTransform(), NoopSink())


def edges(shape: str, n: int) -> list[tuple[str, str]]:
    """(upstream, downstream) pairs: a chain t0 -> t1 -> ..., or t0 -> every other node."""
    if shape == "chain":
        return [(f"t{i - 1}", f"t{i}") for i in range(1, n)]
    return [("t0", f"t{i}") for i in range(1, n)]


def register(shape: str, n: int) -> str:
    from scheduler.pipelines.registry import register_workflow

    workflow_id = f"bench.{shape}_{n}"
    register_workflow(workflow_id, {f"t{i}": noop_factory for i in range(n)}, edges(shape, n), replace=True)
    return workflow_id
