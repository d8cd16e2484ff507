"""Only what needs Django touches it, and only when it is used.

These run in a subprocess with their own minimal settings so they pass with
or without pytest-django and never disturb the test process's Django setup.
"""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import scheduler.pipelines

PACKAGE = Path(scheduler.pipelines.__file__).parent
REPO = PACKAGE.parent.parent


def run_python(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(tmp_path)]))
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        check=False,
        text=True,
        env=env,
        timeout=60,
    )


def test_no_pipelines_module_imports_django_at_module_level():
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:  # module level only; imports inside functions are the point
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "django" for n in names), f"{path.name} imports {names}"


def test_importing_every_pipelines_module_does_not_load_django(tmp_path):
    modules = sorted(f"scheduler.pipelines.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    result = run_python(
        f"""
        import importlib, sys
        for name in {modules!r}:
            importlib.import_module(name)
        loaded = sorted(m for m in sys.modules if m.startswith('django'))
        assert not loaded, loaded
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr


def test_autodiscover_imports_the_setting_modules_and_app_modules_once(tmp_path):
    (tmp_path / "team_pipelines.py").write_text(
        "from scheduler.pipelines import register_pipeline\n"
        "import builtins\n"
        "builtins.IMPORTS = getattr(builtins, 'IMPORTS', 0) + 1\n"
        "register_pipeline('team.sync', lambda ctx: None)\n"
    )
    app = tmp_path / "teamapp"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "etl_pipelines.py").write_text(
        "from scheduler.pipelines import register_pipeline\nregister_pipeline('app.sync', lambda ctx: None)\n"
    )
    result = run_python(
        """
        import builtins, django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=['teamapp'], ETL_PIPELINE_MODULES=['team_pipelines'])
        django.setup()
        from scheduler.pipelines import autodiscover, is_registered
        autodiscover()
        autodiscover()
        assert is_registered('pipeline', 'team.sync')
        assert is_registered('pipeline', 'app.sync')
        assert builtins.IMPORTS == 1
        print('ok')
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_autodiscover_names_the_setting_when_a_module_is_missing(tmp_path):
    result = run_python(
        """
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[], ETL_PIPELINE_MODULES=['missing_team_module'])
        django.setup()
        from scheduler.core import ConfigError
        from scheduler.pipelines import autodiscover
        try:
            autodiscover()
        except ConfigError as exc:
            assert exc.field == 'ETL_PIPELINE_MODULES', exc.field
            assert 'missing_team_module' in str(exc), str(exc)
            print('ok')
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_sql_source_and_sink_work_through_a_django_alias(tmp_path):
    result = run_python(
        f"""
        import django
        from datetime import datetime, timezone
        from django.conf import settings
        settings.configure(
            INSTALLED_APPS=[],
            DATABASES={{'default': {{'ENGINE': 'django.db.backends.sqlite3', 'NAME': {str(tmp_path / "dj.sqlite3")!r}}}}},
        )
        django.setup()
        from scheduler.core import ConfigError, Window
        from scheduler.pipelines.sql import SqlSink, SqlSource
        sink = SqlSink('default', table='events', key='id', create=True)
        rows = [{{'id': i, 'at': datetime(2024, 1, i, tzinfo=timezone.utc)}} for i in range(1, 6)]
        assert sink.load(rows) == 5
        assert sink.load(rows[:2]) == 2
        window = Window(datetime(2024, 1, 2, tzinfo=timezone.utc), datetime(2024, 1, 4, tzinfo=timezone.utc))
        got = list(SqlSource('default', table='events', watermark_column='at', window=window).extract())
        assert [r['id'] for r in got] == [2, 3], got  # [low, high)
        try:
            list(SqlSource('nope', table='events').extract())
        except ConfigError as exc:
            assert exc.field == 'db'
            print('ok')
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_demo_pipelines_read_their_paths_from_django_settings(tmp_path):
    from scheduler.pipelines.demo_data import generate_source_db

    generate_source_db(tmp_path / "src.db", customers=10, orders=20)
    result = run_python(
        f"""
        import django
        from pathlib import Path
        from django.conf import settings
        settings.configure(
            INSTALLED_APPS=[],
            ETL_FILES_DIR={str(tmp_path)!r},
            ETL_DEMO_SOURCE_DB={str(tmp_path / "src.db")!r},
            ETL_DEMO_WAREHOUSE_DB=Path({str(tmp_path / "wh.db")!r}),
            ETL_DEMO_REPORT_DIR={str(tmp_path / "reports")!r},
        )
        django.setup()
        from scheduler.pipelines import RunContext, get_pipeline, load_pipeline_modules
        load_pipeline_modules(['scheduler.pipelines.demo'])
        ctx = RunContext(1, 's', None, {{}}, None)
        assert get_pipeline('demo.orders_sync').build(ctx).run().rows == 20
        get_pipeline('demo.daily_report').build(ctx).run()
        print('ok')
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "wh.db").exists() and (tmp_path / "reports").is_dir()


def test_demo_pipelines_name_the_missing_setting(tmp_path):
    result = run_python(
        """
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[])
        django.setup()
        from scheduler.core import ConfigError
        from scheduler.pipelines import RunContext, get_pipeline, load_pipeline_modules
        load_pipeline_modules(['scheduler.pipelines.demo'])
        try:
            get_pipeline('demo.customers_sync').build(RunContext(1, 's', None, {}, None))
        except ConfigError as exc:
            assert exc.field == 'ETL_DEMO_SOURCE_DB', exc.field
            print('ok')
        """,
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
