"""django-q2 entry points: thin, ids in, call a service."""
from scheduler.services.cluster.execution import execute_run as _execute_run
from scheduler.services.cluster.execution import execute_runs as _execute_runs


def execute_run(run_id: int, token: str) -> str:
    return _execute_run(run_id, token)


def execute_runs(pairs: list[tuple[int, str]]) -> dict[int, str]:
    """A batch of admitted runs in one message (the queue was deep)."""
    return _execute_runs([(int(run_id), str(token)) for run_id, token in pairs])


def noop_task() -> None:
    """Used by the benchmark to measure raw django-q2 throughput."""
    return None
