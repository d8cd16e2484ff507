"""A team's pipelines as an installed package (entry point group `etl_scheduler.pipelines`), what code each target
is, and what a cluster compares to notice newer code (issue 32). Installed packages are made as a `.dist-info`
directory on the path, as pip leaves them."""
from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from scheduler.pipelines import code, registry
from scheduler.pipelines.code import (
    code_changes,
    code_summary,
    dbt_project_code,
    executable_code,
    file_digest,
    installed_code,
    loaded_code,
)
from tests.pipelines.test_django_boundary import run_python

PIPELINES = """\
from scheduler.core import Pipeline
from scheduler.pipelines.noop import NoopSink, NoopSource
from scheduler.pipelines.registry import pipeline

@pipeline("team.sync")
def sync(ctx):
    return Pipeline(NoopSource(n=2), None, NoopSink())
"""


def install(root: Path, *, dist: str = "team-etl", package: str = "team_etl", version: str = "1.2.0",
            pipelines: str = PIPELINES, value: str | None = None, scripts: dict | None = None) -> Path:
    """A package installed into `root` as pip would: its modules and its dist-info with its entry points."""
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    (root / package / "pipelines.py").write_text(pipelines)
    info = root / f"{package}-{version}.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    points = f"[etl_scheduler.pipelines]\nteam = {value or package + '.pipelines'}\n"
    if scripts:
        points += "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
    (info / "entry_points.txt").write_text(points)
    return root / package / "pipelines.py"


def test_an_installed_package_registers_its_pipelines_beside_the_built_ins(tmp_path):
    module = install(tmp_path)
    (tmp_path / "extra_pipelines.py").write_text(
        "from scheduler.pipelines import register_pipeline\nregister_pipeline('extra.sync', lambda ctx: None)\n")
    result = run_python("""
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[], ETL_PIPELINE_MODULES=['extra_pipelines'])
        django.setup()
        from scheduler.pipelines.registry import autodiscover, get_pipeline, is_registered
        autodiscover()
        assert is_registered('pipeline', 'team.sync'), 'the entry point'
        assert is_registered('pipeline', 'extra.sync'), 'ETL_PIPELINE_MODULES adds'
        assert is_registered('pipeline', 'demo.noop') and is_registered('workflow', 'demo.nightly'), 'built-ins'
        print(get_pipeline('team.sync').code.text)
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"team-etl 1.2.0 · {file_digest(module)}"


def test_a_package_that_fails_to_load_is_reported_and_the_others_still_load(tmp_path):
    install(tmp_path / "good")
    install(tmp_path / "bad", dist="broken-etl", package="broken_etl",
            pipelines="raise RuntimeError('typo near postgres://loader:s3cret@db/dwh')\n")
    result = run_python("""
        import sys
        sys.path[:0] = ['good', 'bad']
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[])
        django.setup()
        from scheduler.pipelines.entrypoints import load_problems
        from scheduler.pipelines.registry import autodiscover, is_registered
        autodiscover()
        assert is_registered('pipeline', 'team.sync')
        print(load_problems)
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "broken_etl.pipelines" in result.stdout and "RuntimeError: typo near postgres://loader:***@db/dwh" in (
        result.stdout) and "s3cret" not in result.stdout


def test_without_the_setting_the_built_in_pipelines_are_there(tmp_path):
    result = run_python("""
        import django
        from django.conf import settings
        settings.configure(INSTALLED_APPS=[])
        django.setup()
        from scheduler.pipelines.registry import autodiscover, is_registered
        autodiscover()
        demo = ['customers_sync', 'orders_sync', 'revenue_transform', 'daily_report', 'order_confirmed',
                'webhook_ingest', 'flaky', 'noop']  # what setup_demo's schedules run
        missing = [p for p in demo if not is_registered('pipeline', 'demo.' + p)]
        print(missing, is_registered('workflow', 'demo.nightly'))
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] True"


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("team_etl")]:
        del sys.modules[name]


def test_a_cluster_sees_a_newer_version_and_an_edited_module(on_path, clean_registry):
    module = install(on_path)
    ep = next(e for e in importlib.metadata.entry_points(group=code.ENTRY_POINT_GROUP) if e.value.startswith("team"))
    code.remember_distribution(ep.module, ep.dist)
    importlib.import_module("team_etl.pipelines")
    loaded = loaded_code(registry.registered_modules())
    assert loaded["packages"]["team-etl"] == "1.2.0" and loaded["modules"]["team_etl.pipelines"] == file_digest(module)
    assert code_changes(loaded, installed_code(registry.registered_modules())) == []
    module.write_text(PIPELINES.replace("n=2", "n=3"))
    old = loaded["modules"]["team_etl.pipelines"]
    changes = code_changes(loaded, installed_code(registry.registered_modules()))
    assert changes == [f"team_etl.pipelines changed ({old} -> {file_digest(module)})"] and file_digest(module) != old
    install(on_path, version="1.3.0")  # pip install --upgrade: the new dist-info
    (on_path / "team_etl-1.2.0.dist-info" / "METADATA").unlink()
    (on_path / "team_etl-1.2.0.dist-info" / "entry_points.txt").unlink()
    (on_path / "team_etl-1.2.0.dist-info").rmdir()
    changes = code_changes(loaded, installed_code(registry.registered_modules()))
    assert changes[0] == "team-etl 1.2.0 -> 1.3.0"
    assert code_summary(loaded) != code_summary(installed_code(registry.registered_modules()))


def test_a_new_package_installed_is_newer_code(on_path):
    before = installed_code([])
    install(on_path, dist="other-etl", package="other_etl")
    assert code_changes(before, installed_code([])) == ["other-etl 1.2.0 installed"]


def test_a_console_script_is_the_module_it_runs_and_its_distribution(on_path):
    install(on_path, scripts={"team-export": "team_etl.pipelines:sync"})
    bin_dir = on_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "team-export"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    found = executable_code("team-export", path=str(bin_dir))
    assert found.text == f"team-etl 1.2.0 · {file_digest(on_path / 'team_etl' / 'pipelines.py')}"
    plain = bin_dir / "job"
    plain.write_text("#!/bin/sh\necho hi\n")
    plain.chmod(0o755)
    assert executable_code("job", path=str(bin_dir)).text == file_digest(plain)
    assert executable_code("./job", path="", cwd=str(bin_dir)).text == file_digest(plain)
    assert executable_code("no-such-program", path=str(bin_dir)).text == ""


def test_a_dbt_project_is_its_name_version_and_the_files_its_manifest_reads(tmp_path):
    project = tmp_path / "analytics"
    (project / "models").mkdir(parents=True)
    (project / "target").mkdir()
    (project / "dbt_project.yml").write_text(textwrap.dedent("""\
        name: analytics  # the project
        version: '2.1'
        profile: analytics
    """))
    (project / "models" / "orders.sql").write_text("select 1 as id\n")
    (project / "target" / "manifest.json").write_text("{}")
    first = dbt_project_code(str(project))
    assert (first.package, first.version) == ("analytics", "2.1")
    (project / "target" / "manifest.json").write_text('{"a": 1}')  # dbt's own output: not the source
    assert dbt_project_code(str(project)) == first
    (project / "models" / "orders.sql").write_text("select 2 as id\n")
    assert dbt_project_code(str(project)).digest != first.digest
