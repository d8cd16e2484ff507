"""Walk every URL pattern as an anonymous user and as a viewer: nothing shown or changed that should not be."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from scheduler.models import (AuditEntry, Backfill, BackfillWindow, RefusalCount, Run, RunStatus, Schedule,
                              WatermarkHistory)

# their own credentials (HMAC, tokens) or the login itself
OWN_CREDENTIALS = {"scheduler:webhook", "scheduler:event", "scheduler:metrics"}
AUTH_PAGES = {"login", "logout", "admin:login", "admin:logout"}
PUBLIC_ASSETS = {"favicon"}  # a redirect to a static file, as public as the stylesheet
# the viewer's own display settings (kept in their session): every logged-in user may change them
PERSONAL = {"scheduler:preferences", "scheduler:api_tokens", "scheduler:api_token_revoke"}  # and own tokens
WM = {"type": "integer", "column": "id", "initial": 0}


def _walk(patterns=None, namespace=""):
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            ns = entry.namespace or ""
            yield from _walk(entry.url_patterns, f"{namespace}{ns}:" if ns else namespace)
        elif isinstance(entry, URLPattern):
            yield entry, namespace, f"{namespace}{entry.name}" if entry.name else None


def _urls(ids: dict) -> list[tuple[str, str]]:
    found = []
    for pattern, namespace, name in _walk():
        if namespace == "api-v1:" or name == "api_v1_not_found":
            # the REST API's own door (bearer tokens, problem+json): walked by tests/api/test_schemathesis.py
            continue
        if name is None:
            # the admin's own redirects and catch-all; every pattern of ours is named
            assert namespace == "admin:", f"unnamed URL pattern {pattern}"
            continue
        kwargs = {key: ids[key] for key in pattern.pattern.regex.groupindex}
        found.append((name, reverse(name, kwargs=kwargs)))
    return found


@pytest.fixture
def world(make_schedule, now):
    """One of each object so every pattern with an id resolves to something real."""
    from scheduler.services.admission.backfills import backfill_submit
    from scheduler.services.runs.queue import run_trigger_manual

    schedule = make_schedule("orders", watermark_config=WM)
    run = run_trigger_manual(schedule=schedule, actor="tests", now=now)
    backfill = backfill_submit(schedule=schedule, start="0", end="20", window="10", reason="r", requested_by="tests")
    BackfillWindow.objects.filter(backfill=backfill).update(status="FAILED")
    return {
        "run_id": run.pk,
        "schedule_id": schedule.pk,
        "backfill_id": backfill.pk,
        "topic": "orders",
        "name": "orders",
        "app_label": "scheduler",
        "object_id": str(schedule.pk),
        "content_type_id": 1,
        "url": "nowhere/",
        "id": str(schedule.pk),
        "key_id": "nosuchkey",
        "team_id": schedule.owner_id,
        "index": 0,
    }


def _state() -> tuple:
    """Everything an action could change; refusals add only their own permission.denied audit entries."""
    return (
        list(Run.objects.order_by("id").values_list("id", "status")),
        AuditEntry.objects.exclude(action="permission.denied").count(),
        list(Schedule.objects.order_by("id").values_list("id", "enabled", "breaker_status", "breaker_failures")),
        list(Backfill.objects.order_by("id").values_list("id", "status")),
        list(BackfillWindow.objects.order_by("id").values_list("id", "status")),
        WatermarkHistory.objects.count(),
    )


def refused_count(actor: str) -> int:
    """How many times `actor` was refused (repeats in a window share one audit entry, counted here)."""
    return sum(RefusalCount.objects.filter(actor=actor).values_list("count", flat=True))


def _refused_anonymously(response) -> bool:
    if response.status_code in (401, 403, 405):
        return True
    return response.status_code == 302 and "login" in response["Location"]


def test_every_url_is_covered_by_the_walk(world):
    names = {name for name, _ in _urls(world)}
    for expected in [
        "scheduler:overview",
        "scheduler:runs",
        "scheduler:schedule_run_now",
        "scheduler:backfill_submit",
        "scheduler:audit_csv",
        "scheduler:breaker_reset",
        "admin:scheduler_schedule_changelist",
    ]:
        assert expected in names


def test_an_anonymous_user_sees_nothing_and_changes_nothing(client, world):
    before = _state()
    for name, url in _urls(world):
        if name in OWN_CREDENTIALS | AUTH_PAGES | PUBLIC_ASSETS:
            continue
        for method in (client.get, client.post):
            response = method(url)
            assert _refused_anonymously(response), (method.__name__, name, url, response.status_code)
    assert _state() == before


def test_metrics_without_the_token_shows_nothing(client, world, settings):
    settings.ETL_METRICS_TOKEN = "a-real-token-000"
    assert client.get(reverse("scheduler:metrics")).status_code == 403
    settings.ETL_METRICS_TOKEN = ""
    assert client.get(reverse("scheduler:metrics")).status_code == 404


POST_DATA = {
    "enabled": "0",
    "params": "{}",
    "reason": "x",
    "value": "9",
    "op": "set",
    "action": "disable",
    "_selected_action": [],
    # a valid backfill request, so that the refusal is about the schedule and not the form
    "schedule": "orders",
    "range_from": "0",
    "range_to": "10",
    "window_size": "10",
    "max_parallel": "1",
}


def test_a_viewer_reads_every_page_and_every_post_is_refused(viewer_client, world):
    before = _state()
    refusals = 0
    for name, url in _urls(world):
        if name in OWN_CREDENTIALS | AUTH_PAGES | PUBLIC_ASSETS:
            continue
        get = viewer_client.get(url)
        post = viewer_client.post(url, {**POST_DATA, "_selected_action": [world["schedule_id"]]})
        refusals += post.status_code == 403
        if name.startswith("admin:"):
            # a viewer is not staff: the admin sends them to its login
            assert get.status_code == 302 and "login" in get["Location"], (name, get.status_code)
            assert post.status_code == 302 and "login" in post["Location"], (name, post.status_code)
            continue
        assert get.status_code in (200, 405), (name, url, get.status_code)
        if name in PERSONAL:
            continue
        assert post.status_code in (403, 405), (name, url, post.status_code)
        if get.status_code == 405:  # a POST-only action: refused for lack of permission, not of method
            assert post.status_code == 403, (name, url)
            assert "lacks the permission" in post.content.decode(), (name, url)
    assert _state() == before
    # every refusal is on the record, with who and which permission
    # (one audit entry per permission and object in a window, every repeat counted: issue 22)
    denied = AuditEntry.objects.filter(action="permission.denied", actor="victor")
    assert refusals >= 10 and refused_count("victor") == refusals and 0 < denied.count() <= refusals


# the channel test buttons need change_schedule / change_team, which the operator group does not hold at all
NEEDS_CHANGE = {"scheduler:schedule_channel_test", "scheduler:team_channel_test"}


@pytest.fixture
def outsider(make_user):
    """An operator of another team: the world's schedule belongs to the default team."""
    from scheduler.services.access.teams import team_save, team_set_members

    user = make_user("oscar", "operator")
    billing = team_save(data={"name": "billing"}, actor="tests")
    team_set_members(team=billing, add=[user], actor="tests")
    return user


def test_an_operator_of_another_team_reads_every_page_and_every_action_is_refused(client, outsider, world):
    client.force_login(outsider)
    before = _state()
    actions, refused_by_permission = [], []
    for name, url in _urls(world):
        if name in OWN_CREDENTIALS | AUTH_PAGES | PUBLIC_ASSETS:
            continue
        get = client.get(url)
        post = client.post(url, {**POST_DATA, "_selected_action": [world["schedule_id"]]})
        if name.startswith("admin:"):
            assert get.status_code == 302 and "login" in get["Location"], (name, get.status_code)
            assert post.status_code == 302 and "login" in post["Location"], (name, post.status_code)
            continue
        assert get.status_code in (200, 405), (name, url, get.status_code)  # other teams are visible (read-only)
        if name in PERSONAL:
            continue
        if get.status_code == 405 and name in NEEDS_CHANGE:  # the group lacks the permission itself
            assert post.status_code == 403 and "lacks the permission" in post.content.decode(), (name, post.status_code)
            refused_by_permission.append(name)
        elif get.status_code == 405:  # an action on the world's schedule, run or backfill
            actions.append(name)
            assert post.status_code == 403, (name, url, post.status_code)
            text = post.content.decode()
            assert "oscar may not" in text and "team &#x27;default&#x27;" in text, (name, text)
        else:
            assert post.status_code == 405, (name, url, post.status_code)
    assert _state() == before
    assert {"scheduler:schedule_run_now", "scheduler:schedule_toggle", "scheduler:schedule_watermark",
            "scheduler:breaker_reset", "scheduler:run_cancel", "scheduler:backfill_submit",
            "scheduler:backfill_pause", "scheduler:backfill_cancel", "scheduler:backfill_retry"} <= set(actions)
    assert set(refused_by_permission) == NEEDS_CHANGE
    denied = AuditEntry.objects.filter(action="permission.denied", actor="oscar")
    assert refused_count("oscar") == len(actions) + len(refused_by_permission)
    assert set(denied.exclude(after__permission__in=["scheduler.change_schedule", "scheduler.change_team"])
               .values_list("team_id", flat=True)) == {Schedule.objects.get(name="orders").owner_id}


def test_the_owning_teams_operator_may_act(operator_client, world):
    response = operator_client.post(
        reverse("scheduler:schedule_run_now", args=[world["schedule_id"]]), {"params": "{}"}
    )
    assert response.status_code == 302
    assert Run.objects.filter(schedule_id=world["schedule_id"]).count() == 2


def _as_seen(response, pk) -> str:
    """A 404 page (styled, issue 37) less what differs for any two ids: the id asked for, where the page repeats it,
    and the CSRF token, masked afresh in every response. What is left must not tell a hidden object from none."""
    text = re.sub(rf"(?<=#){pk}\b|(?<=%2F){pk}(?=%2F)|(?<=/){pk}(?=/)", "<id>", response.content.decode())
    return re.sub(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": ")[^"]+', r"\1<token>", text)


def test_other_teams_are_hidden_when_viewing_all_is_off(client, outsider, world, settings):
    """Answered 404 as a missing id is (issue 33: a 403 told that the id exists), and the refusal audited."""
    settings.ETL_TEAMS_VIEW_ALL = False
    client.force_login(outsider)
    for name, key in (("scheduler:schedule_detail", "schedule_id"), ("scheduler:run_detail", "run_id"),
                      ("scheduler:backfill_detail", "backfill_id")):
        theirs, missing = (client.get(reverse(name, args=[pk])) for pk in (world[key], 987654))
        assert theirs.status_code == missing.status_code == 404
        assert _as_seen(theirs, world[key]) == _as_seen(missing, 987654)
    assert AuditEntry.objects.filter(action="permission.denied", actor="oscar").count() == 3


def test_an_operator_post_without_a_csrf_token_is_refused(operator, world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(reverse("scheduler:schedule_run_now", args=[world["schedule_id"]]), {"params": "{}"})
    assert response.status_code == 403
    assert Run.objects.filter(status=RunStatus.QUEUED).count() == 1  # only the world's run


def test_a_viewer_sees_no_action_buttons(viewer_client, world):
    page = viewer_client.get(reverse("scheduler:schedule_detail", args=[world["schedule_id"]])).content.decode()
    assert 'id="run-now"' not in page and "Reset breaker" not in page and 'id="watermark-form"' not in page


# --- beyond the URLs: every management command and every SchedulerHost method that changes a schedule -------------
# (issue 22) run as an operator of another team who may edit schedules of their own team: each is refused,
# changes nothing, and leaves a refusal on the audit record.

# commands that do not act on a schedule, or are the shell's own trusted work, and why
COMMANDS_NOT_ACTING_ON_A_SCHEDULE = {
    "api_token": "a user's own REST tokens (created by the shell for a named user)",
    "backfill_status": "reads",
    "export_schedules": "reads",
    "freshness": "reads",
    "next_fires": "reads",
    "run_log": "reads",
    "scheduler_status": "reads",
    "validate_schedules": "reads (checks a file, changes nothing)",
    "connection": "a team's connections, not a schedule (another team's is refused: "
                  "tests/services/test_connections.py)",
    "lineage_flush": "the lineage outbox (no schedule)",
    "qcluster": "the worker process",
    "serve": "the web process",
    "run_pipeline": "runs a registered pipeline in this process, outside every schedule and the ledger",
    "setup_demo": "the demo's own data, from the shell",
    "init_production": "makes an installation ready (migrate, workload classes, the first admin), from the shell",
    "prune_history": "retention of every team's finished history, an operator's maintenance from the shell "
    "(what it may never delete: docs/semantics.md, Retention)",
    "audit_archive": "reads an audit archive file",
    "new_project": "writes a team's package into a directory (no schedule, no database)",
    "reload_workers": "asks every team's clusters to restart on the code installed, an operator's maintenance from "
    "the shell (each run begun finishes first)",
}
# emit_event is no refusal but a scope: the operator's event reaches only their own teams' schedules
COMMANDS_SCOPED = {"emit_event"}


def _command_calls(world, tmp_path) -> dict[str, list[str]]:
    run, schedule = str(world["run_id"]), "orders"
    changed = tmp_path / "schedules.yaml"
    changed.write_text("version: 1\nschedules:\n  - name: orders\n    target_id: demo.noop\n    trigger_kind: manual\n"
                       "    priority: 9\n")
    return {
        "apply_schedules": [str(changed), "--actor", "oscar"],
        "backfill": [schedule, "--from", "0", "--to", "10", "--window", "10", "--reason", "r", "--actor", "oscar"],
        "cancel_run": [run, "--actor", "oscar"],
        "event_token": ["create", "--name", "n", "--team", "default", "--actor", "oscar"],
        "rerun_from_failure": [run, "--actor", "oscar"],
        "reset_breaker": [schedule, "--reason", "r", "--actor", "oscar"],
        "rotate_webhook_secret": [schedule, "--actor", "oscar"],
        "team": ["assign", "billing", schedule, "--actor", "oscar"],
        "trigger": [schedule, "--actor", "oscar"],
        "watermark": [schedule, "--set", "5", "--reason", "r", "--actor", "oscar"],
    }


@pytest.fixture
def editor(outsider):
    """oscar, of team billing, may also create, edit and delete schedules (of his own team)."""
    from django.contrib.auth.models import Permission

    outsider.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="scheduler", codename__in=["add_schedule", "change_schedule", "delete_schedule"]))
    return outsider


def _full_state() -> tuple:
    from scheduler.models import EventToken

    return (_state(), list(Schedule.objects.order_by("id").values_list("id", "owner_id", "priority", "webhook_secret")),
            EventToken.objects.count())


def test_every_command_as_an_operator_of_another_team_is_refused(world, editor, tmp_path):
    from io import StringIO

    from django.core.management import CommandError, call_command, get_commands

    ours = {name for name, app in get_commands().items() if app == "scheduler" and not name.startswith("_")}
    calls = _command_calls(world, tmp_path)
    assert ours == set(calls) | set(COMMANDS_NOT_ACTING_ON_A_SCHEDULE) | COMMANDS_SCOPED, \
        "a new command: walk it here (or say why it does not act on a schedule)"
    before = _full_state()
    for name, args in calls.items():
        denied = refused_count("oscar")
        with pytest.raises(CommandError) as info:
            call_command(name, *args, stdout=StringIO(), stderr=StringIO())
        assert "oscar may not" in str(info.value), (name, str(info.value))
        assert refused_count("oscar") == denied + 1, name
        assert _full_state() == before, name
    out = StringIO()
    call_command("emit_event", "orders", "--actor", "oscar", "--json", stdout=out)
    assert json.loads(out.getvalue())["runs"] == []  # the default team's event schedule would match: not his
    assert _state()[0] == before[0][0]


def _facade_calls(world) -> dict[str, object]:
    from scheduler.host import SchedulerHost

    host, run, backfill = SchedulerHost(), world["run_id"], world["backfill_id"]
    text = ("version: 1\nschedules:\n  - name: orders\n    target_id: demo.noop\n    trigger_kind: manual\n"
            "    priority: 9\n")
    return {
        "trigger_manual": lambda: host.trigger_manual("orders", actor="oscar"),
        "submit_backfill": lambda: host.submit_backfill("orders", "0", "10", "10", reason="r", requested_by="oscar"),
        "reset_circuit_breaker": lambda: host.reset_circuit_breaker("orders", reset_by="oscar"),
        "rerun_from_failure": lambda: host.rerun_from_failure(run, actor="oscar"),
        "cancel_run": lambda: host.cancel_run(run, actor="oscar"),
        "watermarks.set": lambda: host.watermarks.set("orders", "5", reason="r", actor="oscar"),
        "watermarks.reset": lambda: host.watermarks.reset("orders", reason="r", actor="oscar"),
        "backfills.pause": lambda: host.backfills.pause(backfill, actor="oscar"),
        "backfills.resume": lambda: host.backfills.resume(backfill, actor="oscar"),
        "backfills.cancel": lambda: host.backfills.cancel(backfill, actor="oscar"),
        "backfills.retry_failed": lambda: host.backfills.retry_failed(backfill, actor="oscar"),
        "schedules.create": lambda: host.schedules.create("new", target_id="demo.noop", trigger_kind="manual",
                                                          owner="default", actor="oscar"),
        "schedules.update": lambda: host.schedules.update("orders", priority=9, actor="oscar"),
        "schedules.delete": lambda: host.schedules.delete("orders", actor="oscar"),
        "schedules.apply": lambda: host.schedules.apply(text, actor="oscar"),
        "schedules.test_channel": lambda: host.schedules.test_channel("orders", actor="oscar"),
    }


# SchedulerHost methods that change no schedule (reads, the process, or a team's own channel), and why
FACADE_NOT_ACTING_ON_A_SCHEDULE = {
    "start": "the process", "stop": "the process", "running": "reads", "reload": "re-reads every schedule's timing",
    "get_active_runs": "reads", "freshness": "reads", "next_fires": "reads", "_schedule_for": "a lookup",
    "storage.get": "reads", "storage.list": "reads", "storage.last_success": "reads",
    "watermarks.get": "reads", "watermarks.history": "reads", "backfills.get": "reads", "backfills.list": "reads",
    "backfills.progress": "reads", "backfills._allowed": "the check itself", "schedules.get": "reads",
    "schedules.list": "reads", "schedules.spec": "reads", "schedules.export": "reads",
    "schedules.test_team_channel": "a team's channel, not a schedule (change_team, held to the team)",
    "audit_log.get": "reads", "audit_log.list": "reads",
}


def _facade_methods() -> set[str]:
    from scheduler.host import SchedulerHost

    host = SchedulerHost()
    found = {n for n in dir(host) if not n.startswith("__") and callable(getattr(host, n))}
    for part in ("storage", "watermarks", "backfills", "schedules", "audit_log"):
        found |= {f"{part}.{n}" for n in dir(getattr(host, part)) if not n.startswith("__")
                  and callable(getattr(getattr(host, part), n))}
    return found


def test_every_facade_method_that_changes_a_schedule_refuses_an_operator_of_another_team(world, editor):
    from scheduler.services.access.teams import PermissionRefused

    calls = _facade_calls(world)
    assert _facade_methods() <= set(calls) | set(FACADE_NOT_ACTING_ON_A_SCHEDULE), \
        sorted(_facade_methods() - set(calls) - set(FACADE_NOT_ACTING_ON_A_SCHEDULE))
    before = _full_state()
    for name, call in calls.items():
        denied = refused_count("oscar")
        with pytest.raises(PermissionRefused, match="oscar may not"):
            call()
        assert refused_count("oscar") == denied + 1, name
        assert _full_state() == before, name
