"""The core must stay importable and testable without Django."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import scheduler.core

CORE = Path(scheduler.core.__file__).parent
REPO = CORE.parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module:
                names.add(node.module)
            elif node.level >= 2:
                # `from .. import models` reaches out of core into the app.
                names.add("scheduler." + (node.module or "<parent>"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "__import__":
            names.update(a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str))
    return names


def test_no_core_module_imports_django_or_the_rest_of_the_app():
    files = sorted(CORE.rglob("*.py"))
    assert len(files) >= 10
    for path in files:
        for name in imported_modules(path):
            root = name.split(".")[0]
            assert root != "django", f"{path.name} imports {name}"
            # Absolute imports of the app (scheduler.models, ...) would drag Django in.
            assert root != "scheduler" or name.startswith("scheduler.core"), f"{path.name} imports {name}"


def test_importing_the_core_does_not_load_django():
    code = ("import sys, scheduler.core; "
            "assert 'django' not in sys.modules, sorted(m for m in sys.modules if m.startswith('django'))")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert result.returncode == 0, result.stderr


def test_every_public_name_is_exported():
    for name in scheduler.core.__all__:
        assert hasattr(scheduler.core, name), name
