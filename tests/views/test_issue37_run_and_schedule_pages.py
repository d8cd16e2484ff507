"""Issue 37, points 6, 7 and 13: the schedules list's switch and the schedule page's pause; the run page's actions
above its evidence, the traceback once, a long script folded; the workflow page's links from nodes to log lines."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse

from scheduler.models import AuditEntry, NodeRecord, RunLogLine, RunStatus, Schedule, TargetKind, Team
from scheduler.views.run_evidence import error_parts

TRACEBACK = ('Traceback (most recent call last):\n  File "/srv/etl/orders.py", line 12, in extract\n'
             '    rows = source.read()\nRuntimeError: source down\n')


@pytest.fixture
def theirs(make_schedule):
    schedule = make_schedule("theirs-ledger")
    Schedule.objects.filter(pk=schedule.pk).update(owner=Team.objects.create(name="payments"))
    return Schedule.objects.get(pk=schedule.pk)


def _toggle(client, schedule, **data):
    return client.post(reverse("scheduler:schedule_toggle", args=[schedule.pk]), data)


def _messages(response) -> list[str]:
    return [str(m) for m in response.wsgi_request._messages]


# --- 6: the list's switch where it is seen; the schedule page's own pause and resume ---------------------------


def test_the_list_puts_the_switch_beside_the_name_so_a_narrow_screen_never_hides_it(operator_client, make_schedule):
    make_schedule("orders")
    page = operator_client.get(reverse("scheduler:schedules")).content.decode()
    heads = re.findall(r"<th>([^<]+)</th>", page[page.index('id="schedules"'):])
    assert heads[:3] == ["Name", "Enabled", "Trigger"]
    row = page[page.index('<tr data-schedule="orders">'):]
    cells = re.findall(r"<td( class=\"[^\"]+\")?>", row[:row.index("</tr>")])
    assert cells[1] == ' class="switch"' and 'class="toggle on"' in row[:row.index("</tr>")]


def test_the_schedule_page_pauses_and_resumes_it_with_a_reason_and_an_audit_entry(operator_client, operator,
                                                                                   make_schedule):
    schedule = make_schedule("orders")
    detail = reverse("scheduler:schedule_detail", args=[schedule.pk])
    page = operator_client.get(detail).content.decode()
    form = page[page.index('id="pause-form"'):]
    form = form[:form.index("</form>")]
    assert 'name="enabled" value="0"' in form and f'name="next" value="{detail}"' in form and "Pause orders" in form
    assert "csrfmiddlewaretoken" in form
    response = _toggle(operator_client, schedule, enabled="0", next=detail, reason="source migration tonight")
    assert response.status_code == 302 and response["Location"] == detail
    assert Schedule.objects.get(pk=schedule.pk).enabled is False
    entry = AuditEntry.objects.filter(action="schedule.update", actor=operator.username).latest("id")
    assert entry.reason == "source migration tonight"
    page = operator_client.get(detail).content.decode()
    assert 'id="paused"' in page and 'name="enabled" value="1"' in page and "Resume orders" in page
    _toggle(operator_client, schedule, enabled="1", next=detail)
    assert Schedule.objects.get(pk=schedule.pk).enabled is True
    assert AuditEntry.objects.filter(action="schedule.update", actor=operator.username).latest("id").reason == \
        "dashboard"


def test_a_viewer_sees_no_pause_button_and_may_not_pause(viewer_client, make_schedule):
    schedule = make_schedule("orders")
    page = viewer_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert 'id="pause-form"' not in page
    assert _toggle(viewer_client, schedule, enabled="0").status_code == 403
    assert Schedule.objects.get(pk=schedule.pk).enabled is True


def test_an_operator_may_not_pause_another_teams_schedule_and_the_refusal_is_audited(operator_client, theirs):
    page = operator_client.get(reverse("scheduler:schedule_detail", args=[theirs.pk])).content.decode()
    assert 'id="pause-form"' not in page
    assert _toggle(operator_client, theirs, enabled="0").status_code in (403, 404)
    assert Schedule.objects.get(pk=theirs.pk).enabled is True
    assert AuditEntry.objects.filter(action="permission.denied", target_id=str(theirs.pk),
                                     after__permission="scheduler.toggle_schedule").exists()


@pytest.mark.parametrize("data, field", [({"enabled": "maybe"}, "enabled:"), ({}, "enabled:"),
                                         ({"enabled": "0", "reason": "x" * 501}, "reason:")])
def test_bad_input_to_the_switch_is_named_and_changes_nothing(operator_client, make_schedule, data, field):
    schedule = make_schedule("orders")
    response = _toggle(operator_client, schedule, **data)
    assert response.status_code == 302
    assert any(m.startswith(field) and "unchanged" in m for m in _messages(response)), _messages(response)
    assert Schedule.objects.get(pk=schedule.pk).enabled is True
    assert not AuditEntry.objects.filter(action="schedule.update", target_id=str(schedule.pk)).exclude(
        actor="tests").exists()


def test_the_switch_goes_back_only_to_a_page_of_this_site(operator_client, make_schedule):
    schedule = make_schedule("orders")
    response = _toggle(operator_client, schedule, enabled="0", next="https://evil.example/")
    assert response["Location"] == reverse("scheduler:schedules")


# --- 7: the action above the evidence ------------------------------------------------------------------------


def _order(page: str, *markers: str) -> list[int]:
    return [page.index(m) for m in markers]


def test_a_running_runs_cancel_sits_under_the_title_above_the_facts(operator_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.RUNNING)
    page = operator_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    title, bar, cancel, facts = _order(page, "<h1>", 'id="run-actions"', 'id="cancel-form"', '<dl class="grid">')
    assert title < bar < cancel < facts and 'class="card actions-card action-bar"' in page


def test_a_failed_runs_rerun_comes_first_then_its_error_then_the_facts_and_the_traceback_shows_once(
        operator_client, make_schedule, make_run, now):
    run = make_run(make_schedule("orders"), RunStatus.FAILED, error=TRACEBACK, reason="RuntimeError: source down")
    RunLogLine.objects.create(run=run, seq=1, at=now, level="INFO", source="scheduler", message="reading")
    RunLogLine.objects.create(run=run, seq=2, at=now, level="ERROR", source="scheduler", message=TRACEBACK.rstrip())
    page = operator_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    bar, rerun, error, facts, log = _order(page, 'id="run-actions"', 'id="rerun-form"', 'id="run-error"',
                                           '<dl class="grid">', 'id="log-lines"')
    assert bar < rerun < error < facts < log
    assert re.search(r'id="error-summary">RuntimeError: source down</p>', page)
    assert page.count("Traceback (most recent call last)") == 1 and page.count("rows = source.read()") == 1
    folded = page[page.rindex("<li", 0, page.index('id="L2"')):]
    folded = folded[:folded.index("</li>")]
    assert "folded-traceback" in folded and 'href="#run-error"' in folded
    assert "reading" in page  # the other lines are shown as they are


def test_a_traceback_the_log_does_not_hold_is_shown_under_error_folded(viewer_client, make_schedule, make_run):
    run = make_run(make_schedule("orders"), RunStatus.FAILED, error=TRACEBACK)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    detail = page[page.index('id="error-detail"'):]
    assert detail.index("<summary>Traceback</summary>") < detail.index("rows = source.read()")
    assert page.count("rows = source.read()") == 1


def test_the_errors_summary_is_the_exception_of_a_traceback_and_the_first_line_of_other_text():
    assert error_parts(TRACEBACK) == {"summary": "RuntimeError: source down", "detail": TRACEBACK.strip()}
    dbt = "dbt build failed: 1 error\n--- last lines ---\nDatabase Error in model orders"
    assert error_parts(dbt)["summary"] == "dbt build failed: 1 error"
    assert error_parts("exit code 3") == {"summary": "exit code 3", "detail": ""}
    assert error_parts("") == {"summary": "", "detail": ""}


def test_a_long_command_script_is_folded_behind_its_first_line(viewer_client, make_schedule, make_run):
    script = "set -eu\n" + "\n".join(f"psql -c 'select {i}' >> /tmp/out" for i in range(40))
    schedule = make_schedule("scripted", target_kind=TargetKind.COMMAND, target_id="", command={"shell": script})
    run = make_run(schedule, RunStatus.RUNNING)
    page = viewer_client.get(reverse("scheduler:run_detail", args=[run.pk])).content.decode()
    fold = page[page.index('id="command-script"'):]
    summary = fold[fold.index("<summary>"):fold.index("</summary>")]
    assert "<code>set -eu…</code>" in summary and "41 lines" in summary and "select 3" not in summary
    assert page.count("select 39") == 1 and page.index('id="run-actions"') < page.index('id="command-script"')


def test_a_short_command_line_is_shown_whole(viewer_client, make_schedule):
    schedule = make_schedule("short", target_kind=TargetKind.COMMAND, target_id="",
                             command={"argv": ["dbt", "build"]})
    page = viewer_client.get(reverse("scheduler:schedule_detail", args=[schedule.pk])).content.decode()
    assert "<code>dbt build</code>" in page and 'id="command-script"' not in page


# --- 13: the workflow page -----------------------------------------------------------------------------------


@pytest.fixture
def workflow_run(make_schedule, make_run, now):
    schedule = make_schedule("wf", target_kind=TargetKind.WORKFLOW, target_id="demo.nightly")
    run = make_run(schedule, RunStatus.FAILED, report={
        "records": [{"task_id": "extract", "outcome": "SUCCESS", "rows": 5},
                    {"task_id": "check", "outcome": "FAILED", "reason": "bad row"}],
        "skipped": [], "blocked": ["load"]})  # node names of the test's own: the page draws what the report holds
    start = now - timedelta(minutes=4)
    NodeRecord.objects.create(run=run, task_id="extract", outcome="SUCCESS", started_at=start,
                              finished_at=start + timedelta(seconds=60))
    NodeRecord.objects.create(run=run, task_id="check", outcome="FAILED", started_at=start + timedelta(seconds=60),
                              finished_at=start + timedelta(seconds=60, milliseconds=40), error="bad row")
    for seq, node in enumerate(["extract", "check"], start=1):
        RunLogLine.objects.create(run=run, seq=seq, at=start, level="INFO", source="scheduler", node=node,
                                  message=f"{node} says hello")
    return run


def test_graph_nodes_that_ran_link_to_their_log_lines_and_a_blocked_one_does_not(viewer_client, workflow_run):
    page = viewer_client.get(reverse("scheduler:run_detail", args=[workflow_run.pk])).content.decode()
    graph = page[page.index('<svg class="graph"'):]
    graph = graph[:graph.index("</svg>")]
    assert re.search(r'<a class="node n-succeeded" href="\?node=extract#logs"', graph)
    assert re.search(r'<a class="node n-failed" href="\?node=check#logs"', graph)
    assert '<g class="node n-blocked">' in graph and "node=load" not in graph
    assert 'id="L1"' in page and 'id="L2"' in page  # every log line is an anchor
    linked = viewer_client.get(reverse("scheduler:run_detail", args=[workflow_run.pk]), {"node": "check"})
    body = linked.content.decode()
    assert "check says hello" in body and "extract says hello" not in body


def test_the_gantt_has_an_axis_readable_rows_linked_to_the_log_and_a_fast_failed_node_is_visible(
        viewer_client, workflow_run):
    page = viewer_client.get(reverse("scheduler:run_detail", args=[workflow_run.pk])).content.decode()
    gantt = page[page.index('id="node-gantt"'):]
    gantt = gantt[:gantt.index("</svg>")]
    assert 'id="gantt-axis"' in gantt and gantt.count('class="tick-label"') >= 4  # labelled above and below
    rows = re.findall(r'<a class="gantt-row" href="\?node=(\w+)#logs"', gantt)
    assert rows == ["extract", "check"]
    widths = dict(re.findall(r'data-node="(\w+)" x="[\d.]+" y="[\d.]+" width="([\d.]+)" height="14"', gantt))
    assert float(widths["check"]) >= 6 and float(widths["extract"]) > 600  # 40 ms of 60 s: still a bar
