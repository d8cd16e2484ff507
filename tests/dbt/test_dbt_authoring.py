"""A dbt target is authored at every door (schedules file, admin, Python API); a bad definition names its key."""
from __future__ import annotations

import json
import textwrap

import pytest
from django.urls import reverse

from scheduler.host import SchedulerHost
from scheduler.models import AuditEntry, Schedule
from scheduler.services.common.errors import ServiceError
from scheduler.services.definitions.schedule_files import ScheduleFileError, schedules_apply, schedules_export
from scheduler.services.definitions.schedules import schedule_save
from tests.views.test_admin import ADD, _form

pytestmark = pytest.mark.django_db

# the issue's example, as written
MARTS = textwrap.dedent("""\
    - name: marts
      target_kind: dbt
      dbt: {project_dir: /srv/analytics, profiles_dir: /srv/analytics, target: prod, select: "tag:daily"}
""")
SPEC = {"project_dir": "/srv/analytics", "profiles_dir": "/srv/analytics", "target": "prod", "select": "tag:daily"}

BAD = [
    ({"profiles_dir": "/srv"}, "dbt.project_dir", "must be an absolute directory path"),
    ({"project_dir": "srv/analytics"}, "dbt.project_dir", "must be an absolute directory path"),
    ({"project_dir": "/srv/a", "profiles_dir": "~/.dbt"}, "dbt.profiles_dir", "must be an absolute directory path"),
    ({"project_dir": "/srv/a", "target": "--debug"}, "dbt.target", "must be a profile target name"),
    ({"project_dir": "/srv/a", "select": "tag:daily --profiles-dir /etc"}, "dbt.select", "looks like a flag"),
    ({"project_dir": "/srv/a", "exclude": ["-x"]}, "dbt.exclude", "looks like a flag"),
    ({"project_dir": "/srv/a", "select": 5}, "dbt.select", "must be a dbt selection"),
    ({"project_dir": "/srv/a", "full_refresh": "yes"}, "dbt.full_refresh", "must be true or false"),
    ({"project_dir": "/srv/a", "threads": 0}, "dbt.threads", "must be a whole number from 1 to 256"),
    ({"project_dir": "/srv/a", "threads": True}, "dbt.threads", "must be a whole number"),
    ({"project_dir": "/srv/a", "vars": ["a"]}, "dbt.vars", "must be an object"),
    ({"project_dir": "/srv/a", "vars": {"run_id": 1}}, "dbt.vars", "the scheduler sets these"),
    ({"project_dir": "/srv/a", "models": "x"}, "dbt", "unknown key(s) models"),
]


def file_of(entries: str) -> str:
    return "version: 1\nschedules:\n" + textwrap.indent(entries, "  ")


def test_the_issues_example_applies_as_written_and_round_trips():
    plan = schedules_apply(text=file_of(MARTS), actor="tests")
    assert plan.summary["create"] == 1
    schedule = Schedule.objects.get(name="marts")
    assert (schedule.target_kind, schedule.target_id, schedule.dbt, schedule.command) == ("dbt", "", SPEC, {})
    assert AuditEntry.objects.get(action="schedule.create").after["dbt"] == SPEC
    text = schedules_export()
    assert "target_kind: dbt" in text and "project_dir: /srv/analytics" in text
    assert schedules_apply(text=text, actor="tests").summary["unchanged"] == 1


@pytest.mark.parametrize("spec, field, words", BAD)
def test_a_bad_dbt_entry_in_the_schedules_file_names_the_key_and_changes_nothing(make_schedule, spec, field, words):
    make_schedule("keep", priority=3)
    entry = {"name": "marts", "target_kind": "dbt", "dbt": spec}
    text = "version: 1\nschedules:\n- {name: keep, target_id: demo.noop, priority: 4}\n- " + _flow(entry) + "\n"
    with pytest.raises(ScheduleFileError) as info:
        schedules_apply(text=text, actor="tests")
    [problem] = info.value.problems
    assert (problem.entry, problem.field) == ("schedules[1] (marts)", field)
    assert words in problem.problem
    assert list(Schedule.objects.values_list("name", "priority")) == [("keep", 3)]


def _flow(entry: dict) -> str:
    return json.dumps(entry)  # JSON is YAML: the entry as one flow mapping


@pytest.mark.parametrize("fields, field", [
    ({"target_kind": "dbt"}, "dbt"),
    ({"target_kind": "dbt", "dbt": SPEC, "target_id": "demo.noop"}, "target_id"),
    ({"target_kind": "dbt", "dbt": SPEC, "command": {"argv": ["dbt"]}}, "command"),
    ({"target_kind": "pipeline", "target_id": "demo.noop", "dbt": SPEC}, "dbt"),
    *[({"target_kind": "dbt", "dbt": spec}, f) for spec, f, _ in BAD],
])
def test_the_python_api_refuses_a_bad_dbt_target_naming_the_field(standard_class, fields, field):
    with pytest.raises(ServiceError) as info:
        SchedulerHost().schedules.create("marts", **fields)
    assert field in {error.field for error in info.value.errors}, info.value.errors
    assert not Schedule.objects.exists()


def test_a_bad_update_keeps_the_stored_definition(standard_class):
    host = SchedulerHost()
    host.schedules.create("marts", target_kind="dbt", dbt=SPEC)
    with pytest.raises(ServiceError) as info:
        host.schedules.update("marts", dbt={**SPEC, "threads": -1})
    assert info.value.field == "dbt.threads"
    assert Schedule.objects.get().dbt == SPEC
    schedule_save(data={"dbt": {**SPEC, "full_refresh": True, "vars": {"region": "eu"}}},
                  schedule=Schedule.objects.get(), actor="tests")
    assert Schedule.objects.get().dbt == {**SPEC, "full_refresh": True, "vars": {"region": "eu"}}


# --- the admin ---------------------------------------------------------------------------------

@pytest.fixture
def admin_client(client, make_user):
    client.force_login(make_user("ada", "admin", is_staff=True))
    return client


def _dbt_form(standard_class, **overrides):
    return _form(standard_class, **{"name": "marts", "target_kind": "dbt", "target_id": "", "dbt": SPEC,
                                    **overrides})


def test_an_admin_creates_a_dbt_target_and_the_change_list_says_what_it_runs(admin_client, standard_class):
    form = admin_client.get(ADD).context["adminform"].form
    assert ("dbt", "dbt build") in form.fields["target_kind"].choices and "--vars" in form.fields["dbt"].help_text
    response = admin_client.post(ADD, _dbt_form(standard_class))
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get(name="marts").dbt == SPEC
    body = admin_client.get(reverse("admin:scheduler_schedule_changelist")).content.decode()
    assert "dbt build /srv/analytics --select tag:daily" in body
    page = admin_client.get(reverse("scheduler:schedule_detail", args=[Schedule.objects.get().pk])).content.decode()
    assert "build --no-use-colors --no-send-anonymous-usage-stats --no-version-check --project-dir" in page
    assert "--select tag:daily" in page and "--target prod" in page


@pytest.mark.parametrize("spec, field, words", BAD[:6])
def test_a_bad_dbt_definition_in_the_admin_shows_under_its_field_and_saves_nothing(
        admin_client, standard_class, spec, field, words):
    response = admin_client.post(ADD, _dbt_form(standard_class, dbt=spec))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert words in " ".join(errors["dbt"]), errors
    assert field.split(".")[-1] in " ".join(errors["dbt"])
    assert not Schedule.objects.exists()
