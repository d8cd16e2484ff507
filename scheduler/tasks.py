"""django-q2 entry points: thin, ids in, call a service."""
from scheduler.services.execution import execute_run as _execute_run


def execute_run(run_id: int, token: str) -> str:
    return _execute_run(run_id, token)


def noop_task() -> None:
    """Used by the benchmark to measure raw django-q2 throughput."""
    return None
