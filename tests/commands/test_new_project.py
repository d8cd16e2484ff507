"""`new_project NAME [--dir DIR]`: a team's package, ready to install (the walk to a run: tests/integration)."""
import tomllib
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from scheduler.core import WatermarkConfig


def test_it_writes_a_package_with_its_entry_point_pipeline_command_schedules_test_and_readme(tmp_path):
    out = StringIO()
    call_command("new_project", "sales", "--dir", str(tmp_path / "sales"), stdout=out)
    root = tmp_path / "sales"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == [
        "README.md", "pyproject.toml", "schedules.yaml", "src/sales_etl/__init__.py", "src/sales_etl/export.py",
        "src/sales_etl/pipelines.py", "tests/test_events.py"]
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["name"] == "sales-etl" and project["project"]["version"] == "0.1.0"
    assert project["project"]["entry-points"]["etl_scheduler.pipelines"] == {"sales": "sales_etl.pipelines"}
    assert project["project"]["scripts"] == {"sales-export": "sales_etl.export:main"}
    pipelines = (root / "src/sales_etl/pipelines.py").read_text()
    assert '@pipeline("sales.events"' in pipelines and "SALES_SOURCE_DB" in pipelines
    compile(pipelines, "pipelines.py", "exec")
    compile((root / "src/sales_etl/export.py").read_text(), "export.py", "exec")
    compile((root / "tests/test_events.py").read_text(), "test_events.py", "exec")
    sync, export = yaml.safe_load((root / "schedules.yaml").read_text())["schedules"]
    mark = WatermarkConfig.from_dict(sync["watermark_config"])
    assert (mark.lag.total_seconds(), mark.overlap.total_seconds()) == (120, 300)
    text = (root / "schedules.yaml").read_text()
    assert "# lag: read nothing newer than 2 minutes ago" in text and "# overlap: each run also re-reads" in text
    assert (export["target_kind"], export["command"], export["depends_on"]) == (
        "command", {"argv": ["sales-export"]}, ["sales_events"])
    readme = (root / "README.md").read_text()
    for step in ("pip install -e .", "pytest tests", "apply_schedules", "trigger sales_events", "reload_workers"):
        assert step in readme
    assert "sales's project is in" in out.getvalue()


def test_the_default_directory_is_the_distributions_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call_command("new_project", "data_team", stdout=StringIO())
    assert (tmp_path / "data-team-etl" / "src" / "data_team_etl" / "pipelines.py").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["Sales"], "name: must be 1-30 lowercase letters"),
    (["1sales"], "name: must be 1-30 lowercase letters"),
    (["sales-team"], "name: must be 1-30 lowercase letters"),
])
def test_a_bad_name_exits_2_and_writes_nothing(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CommandError) as info:
        call_command("new_project", *args)
    assert info.value.returncode == 2 and str(info.value).startswith(message)
    assert list(tmp_path.iterdir()) == []


def test_it_never_writes_into_a_directory_that_holds_something(tmp_path):
    (tmp_path / "sales").mkdir()
    (tmp_path / "sales" / "notes.txt").write_text("mine")
    with pytest.raises(CommandError) as info:
        call_command("new_project", "sales", "--dir", str(tmp_path / "sales"))
    assert info.value.returncode == 2 and "--dir" in str(info.value) and "nothing was written" in str(info.value)
    assert [p.name for p in (tmp_path / "sales").iterdir()] == ["notes.txt"]
