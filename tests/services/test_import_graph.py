"""The services read top-down: no import cycle, no import hidden in a function, one owner of a run's end."""
from __future__ import annotations

import ast
from pathlib import Path

import scheduler

PACKAGE = Path(scheduler.__file__).parent
SERVICES = PACKAGE / "services"
FINAL = {"SUCCEEDED", "FAILED", "SKIPPED", "BLOCKED", "CANCELLED"}


# The service packages, bottom first: a module may import its own package and the packages below it, never above.
LAYERS = ["common", "history", "integrations", "access", "runs", "oversight", "worker", "admission", "definitions",
          "cluster"]


def _modules() -> dict[str, ast.Module]:
    """Every service module as `package.module` (a package's face is `package.__init__`)."""
    return {f"{path.parent.name}.{path.stem}": ast.parse(path.read_text(), str(path))
            for path in sorted(SERVICES.glob("*/*.py"))}


def _service_imports(tree: ast.Module) -> set[str]:
    """The service modules (`package.module`, or `package.__init__` for a package's face) a module imports."""
    found: set[str] = set()
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("scheduler.services"):
            parts = node.module.split(".")[2:]
            if len(parts) == 0:
                found.update(f"{alias.name}.__init__" for alias in node.names)
            elif len(parts) == 1:
                found.update(f"{parts[0]}.{alias.name}" if (SERVICES / parts[0] / f"{alias.name}.py").exists()
                             else f"{parts[0]}.__init__" for alias in node.names)
            else:
                found.add(".".join(parts[:2]))
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    found.update(".".join(name.split(".")[2:4]) for name in names if name.startswith("scheduler.services."))
    return found


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Arrows from a package to one above it in LAYERS."""
    rank = {name: index for index, name in enumerate(LAYERS)}
    return [f"{src} -> {dst}" for src, dsts in sorted(graph.items()) for dst in sorted(dsts)
            if rank[dst.split(".")[0]] > rank[src.split(".")[0]]]


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
    assert graph["runs.end"], "runs/end.py is read from its imports"
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_every_service_module_sits_in_a_named_layer():
    assert {path.name for path in SERVICES.iterdir() if path.is_dir() and path.name != "__pycache__"} == set(LAYERS)
    assert [path.name for path in SERVICES.glob("*.py")] == ["__init__.py"], "no module outside a package"


def test_imports_between_service_packages_run_downward():
    graph = {name: _service_imports(tree) for name, tree in _modules().items()}
    assert _upward(graph) == []


def test_the_direction_check_sees_an_arrow_up():
    assert _upward({"runs.end": {"common.audit", "runs.queue"}}) == []
    assert _upward({"runs.end": {"cluster.execution"}}) == ["runs.end -> cluster.execution"]
    tree = ast.parse("from scheduler.services.cluster import execution\nfrom scheduler.services.runs.end import x\n")
    assert _service_imports(tree) == {"cluster.execution", "runs.end"}


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
    "pipelines/sql_db.py": "psycopg, dj-database-url and Django are needed only by a database of that kind",
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
    SERVICES / "runs" / "end.py": "the one owner of a run's end",
    SERVICES / "runs" / "lost.py": "a tick's lost runs in one statement, guarded by the same table (core/ends.py)",
    SERVICES
    / "runs"
    / "downstream.py": "blocks the waiting dependents of a run that finish.py ended, in its transaction",
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
    "scheduler/services/worker/processes.py": "run control's process side: signals a command's group, reaps leftovers",
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
