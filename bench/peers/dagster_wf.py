"""Dagster: N no-op ops as a chain or a fan-out, execute_in_process. Usage: dagster_wf.py chain|fanout N"""
import sys
import time

from dagster import DependencyDefinition, GraphDefinition, In, NodeInvocation, Nothing, op

SHAPE, N = sys.argv[1], int(sys.argv[2])


@op(ins={"after": In(Nothing)})
def noop() -> None:
    return None


if __name__ == "__main__":
    deps = {}
    for i in range(1, N):
        upstream = f"t{i - 1}" if SHAPE == "chain" else "t0"
        deps[NodeInvocation("noop", alias=f"t{i}")] = {"after": DependencyDefinition(upstream, "result")}
    deps.setdefault(NodeInvocation("noop", alias="t0"), {})
    t0 = time.perf_counter()
    graph = GraphDefinition(name=f"bench_{SHAPE}_{N}", node_defs=[noop], dependencies=deps)
    result = graph.to_job().execute_in_process()
    elapsed = time.perf_counter() - t0
    steps = [e for e in result.all_events if e.event_type_value == "STEP_SUCCESS"]
    assert result.success and len(steps) == N, (result.success, len(steps))
    print(f"ok {len(steps)} {elapsed:.6f}")
