"""The services read top-down: no import cycle, no import hidden in a function, one owner of a run's end."""
from __future__ import annotations

import ast
from pathlib import Path

import scheduler

PACKAGE = Path(scheduler.__file__).parent
SERVICES = PACKAGE / "services"
FINAL = {"SUCCEEDED", "FAILED", "SKIPPED", "BLOCKED", "CANCELLED"}


def _modules() -> dict[str, ast.Module]:
    return {path.stem: ast.parse(path.read_text(), str(path)) for path in sorted(SERVICES.glob("*.py"))}


def _service_imports(tree: ast.Module) -> set[str]:
    """The sibling service modules a module imports at its top level."""
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "scheduler.services":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("scheduler.services."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("scheduler.services."):
                    found.add(alias.name.split(".")[2])
    return found


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for nxt in sorted(graph.get(name, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(graph):
        if name not in state and (found := visit(name)):
            return found
    return None


def test_the_services_import_graph_has_no_cycle():
    graph = {name: _service_imports(tree) for name, tree in _modules().items()}
    assert graph["finish"], "finish.py is read from its imports"
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_service_module_imports_inside_a_function():
    hidden = []
    for name, tree in _modules().items():
        for func in ast.walk(tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for node in ast.walk(func):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        hidden.append(f"{name}.py:{node.lineno}")
    assert hidden == []


# where an import inside a function has a reason other than dodging a cycle
LAZY_IMPORT_ALLOWED = {
    "apps.py": "AppConfig.ready() is where Django wants app-loading imports",
    "core/cron.py": "cron-descriptor is optional: the description falls back to the expression",
    "pipelines/sql.py": "psycopg / dj-database-url are needed only by a SqlSource on another database",
    "pipelines/demo.py": "the demo pipelines are importable without configured settings",
    "pipelines/registry.py": "the registry is importable without configured settings (pipeline authors' tests)",
}


def test_no_module_of_the_package_hides_an_import_in_a_function():
    hidden = []
    for path in sorted(PACKAGE.rglob("*.py")):
        label = str(path.relative_to(PACKAGE))
        if "migrations" in path.parts or label in LAZY_IMPORT_ALLOWED:
            continue
        tree = ast.parse(path.read_text(), label)
        for func in ast.walk(tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                hidden += [f"{label}:{node.lineno}" for node in ast.walk(func)
                           if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert hidden == []


def _final_status_writes(source: str, label: str) -> list[str]:
    """Calls that would write a final run status (`new=` / `status=` keyword set to a final RunStatus)."""
    found = []
    for node in ast.walk(ast.parse(source, label)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if called in {"filter", "exclude", "get", "Q", "count", "values", "annotate", "aggregate", "Exists"}:
            continue  # reading by status is fine
        if called in {"run_finish", "run_refused", "_report"}:
            continue  # asking the owner to do it (execution._report hands a worker's outcome to run_finish)
        for keyword in node.keywords:
            value = keyword.value
            if (keyword.arg in ("new", "status") and isinstance(value, ast.Attribute) and value.attr in FINAL
                    and isinstance(value.value, ast.Name) and value.value.id in ("S", "RunStatus")):
                found.append(f"{label}:{node.lineno} {called}({keyword.arg}={value.value.id}.{value.attr})")
    return found


# the modules that may write a final run status, and why
FINAL_WRITERS = {
    SERVICES / "finish.py": "the one owner of a run's end",
    SERVICES / "downstream.py": "blocks the waiting dependents of a run that finish.py ended, in its transaction",
}


def test_only_the_finish_module_writes_a_final_run_status():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in FINAL_WRITERS or "migrations" in path.parts:
            continue
        offenders += _final_status_writes(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert offenders == []


def test_the_final_status_check_sees_a_write():
    sample = (
        "run_transition(run, new=S.FAILED)\n"
        "Run.objects.filter(status=S.FAILED).update(status=RunStatus.SKIPPED)\n"
        "Backfill.objects.filter(pk=1).update(status=BackfillStatus.CANCELLED)\n"
        "run_transition(run, new=S.WAITING)\n"
    )
    assert [hit.split(" ", 1)[1] for hit in _final_status_writes(sample, "sample.py")] == [
        "run_transition(new=S.FAILED)", "update(status=RunStatus.SKIPPED)",
    ]


# what sends a signal to, or ends, a process
_SIGNALLING = {"kill", "killpg", "send_signal", "terminate", "pthread_kill", "_exit", "abort"}


def _signal_sends(source: str, label: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, label)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SIGNALLING:
            found.append(f"{label}:{node.lineno} {node.func.attr}()")
    return found


# where a process is signalled for a reason that is not a run's control
SIGNALS_ALLOWED = {
    "scheduler/services/worker/supervisor.py": "the one home of run control: stops, kills, reaps a run's processes",
    "scheduler/management/commands/serve.py": "serve stops the gunicorn and qcluster children it started itself",
}


def test_only_the_supervisor_signals_or_ends_a_process():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        label = str(path.relative_to(PACKAGE.parent))
        if "migrations" in path.parts or label in SIGNALS_ALLOWED:
            continue
        offenders += _signal_sends(path.read_text(), label)
    assert offenders == []


def test_the_signal_check_sees_a_kill():
    sample = "os.kill(pid, 9)\nproc.terminate()\nsignal.signal(signal.SIGTERM, handler)\n"
    assert [hit.split(" ", 1)[1] for hit in _signal_sends(sample, "sample.py")] == ["kill()", "terminate()"]
