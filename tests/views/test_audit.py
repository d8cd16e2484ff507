from __future__ import annotations

import csv
import io
from datetime import datetime, timezone

from django.urls import reverse

from scheduler.models import AuditEntry


def _entry(actor, action, day, target=("schedule", "1"), reason=""):
    return AuditEntry.objects.create(
        at=datetime(2026, 3, day, 10, tzinfo=timezone.utc),
        actor=actor,
        action=action,
        target_type=target[0],
        target_id=target[1],
        target_repr=f"{target[0]} {target[1]}",
        reason=reason,
    )


def test_it_filters_by_actor_action_target_and_date(viewer_client, db):
    a = _entry("alice", "run.trigger", 1)
    b = _entry("bob", "breaker.reset", 2, target=("schedule", "7"))
    _entry("alice", "breaker.open", 3)

    def ids(**params):
        return [e.pk for e in viewer_client.get(reverse("scheduler:audit"), params).context["entries"]]

    assert ids(actor="bob") == [b.pk]
    assert sorted(ids(action="run.")) == [a.pk]
    assert ids(target="schedule:7") == [b.pk]
    assert ids(since="2026-03-01", until="2026-03-01") == [a.pk]


def test_it_counts_by_action_actor_and_day(viewer_client, db):
    _entry("alice", "run.trigger", 1)
    _entry("alice", "run.trigger", 1)
    _entry("bob", "breaker.reset", 2)
    # the counts cover the 31 days up to the filter's end (else now): these March entries need an end in March
    counts = viewer_client.get(reverse("scheduler:audit"), {"until": "2026-03-02"}).context["counts"]
    assert counts["by_action"][0] == {"action": "run.trigger", "n": 2}
    assert {c["actor"]: c["n"] for c in counts["by_actor"]} == {"alice": 2, "bob": 1}
    assert [c["n"] for c in counts["by_day"]] == [1, 2]


def test_the_counts_read_only_their_31_days_whatever_the_log_holds(viewer_client, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _entry("alice", "run.trigger", 1)  # 2026-03-01
    _entry("bob", "breaker.reset", 2)  # 2026-03-02
    with CaptureQueriesContext(connection) as queries:
        response = viewer_client.get(reverse("scheduler:audit"), {"until": "2026-04-01"})
    counts = response.context["counts"]
    assert {c["actor"]: c["n"] for c in counts["by_actor"]} == {"bob": 1}  # March 1st is 32 days before April 2nd
    assert "2026-03-02" in response.content.decode() and "31 days" in response.content.decode()
    grouped = [q["sql"] for q in queries.captured_queries if "GROUP BY" in q["sql"]]
    # whole days, so whole hours: the counts (two statements) read the hourly counts of their range, not the log
    assert len(grouped) == 2 and all("auditcount" in sql and '"hour" >=' in sql for sql in grouped)
    assert not any("auditentry" in sql for sql in grouped)
    assert len(response.context["entries"]) == 2  # the list still reads the whole filter


def test_only_the_partial_hours_at_the_edges_are_counted_from_the_log(viewer_client, db):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _entry("alice", "run.trigger", 1)
    with CaptureQueriesContext(connection) as queries:
        counts = viewer_client.get(reverse("scheduler:audit"), {"since": "2026-03-01"}).context["counts"]
    # no until: the window ends now, in the middle of an hour; its start is now - 31 days, mid-hour too
    raw = [q["sql"] for q in queries.captured_queries if "GROUP BY" in q["sql"] and "auditentry" in q["sql"]]
    assert len(raw) == 2 and all('"at" >=' in sql and '"at" <' in sql for sql in raw)
    assert counts["by_action"] == []  # March is long before the window (the tests run in real time)


def test_csv_export_streams_the_filtered_entries_and_defuses_formulas(viewer_client, db):
    _entry("alice", "run.trigger", 1, reason='=HYPERLINK("x")')
    _entry("bob", "breaker.reset", 2)
    response = viewer_client.get(reverse("scheduler:audit_csv"), {"actor": "alice"})
    assert response.streaming and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert rows[0][:4] == ["at", "actor", "actor_kind", "action"]
    assert len(rows) == 2 and rows[1][1] == "alice" and rows[1][7].startswith("'=")


def test_changes_render_as_a_diff_not_as_python_dict_text(viewer_client, make_schedule):
    from scheduler.services.definitions.schedules import schedule_save

    schedule = make_schedule("orders", priority=3)
    schedule_save(data={"priority": 7, "description": "nightly"}, schedule=schedule, actor="tests")
    page = viewer_client.get(reverse("scheduler:audit"), {"action": "schedule.update"}).content.decode()
    assert "{'" not in page and "&#x27;priority&#x27;:" not in page
    assert "<code>priority</code> <del>3</del> → <ins>7</ins>" in page
    assert "<code>description</code> <del>(empty)</del> → <ins>nightly</ins>" in page


def test_a_target_with_a_page_is_a_link(viewer_client, make_schedule, make_run):
    schedule = make_schedule("orders")
    run = make_run(schedule)
    _entry("alice", "run.trigger", 1, target=("run", str(run.pk)))
    _entry("alice", "schedule.delete", 2, target=("schedule", "999"))
    _entry("alice", "event.receive", 3, target=("event", "12"))
    page = viewer_client.get(reverse("scheduler:audit")).content.decode()
    assert f'<a href="/runs/{run.pk}/">run:{run.pk}</a>' in page
    assert f'<a href="/schedules/{schedule.pk}/">schedule:{schedule.pk}</a>' in page  # its create entry
    assert 'href="/schedules/999/"' not in page and "event:12" in page


def test_the_diff_compares_nested_values_by_key():
    from scheduler.templatetags.scheduler_tags import audit_changes

    rows = audit_changes({"status": "OPEN", "cfg": {"cron": "0 * * * *", "tz": "UTC"}},
                         {"status": "CLOSED", "cfg": {"cron": "5 * * * *", "tz": "UTC"}, "by": "ada"})
    assert [(r["key"], r["old"], r["new"], r["kind"]) for r in rows] == [
        ("status", "OPEN", "CLOSED", "changed"), ("cfg.cron", "0 * * * *", "5 * * * *", "changed"),
        ("by", "", "ada", "added"),
    ]
    assert [(r["key"], r["new"], r["kind"]) for r in audit_changes(None, {"windows": 4})] == [("windows", "4", "value")]
    assert audit_changes(None, None) == []
    assert audit_changes({"a": 1}, {})[0]["kind"] == "removed"


def test_the_last_day_the_picker_offers_is_no_upper_bound_on_the_page_and_the_csv(viewer_client, db):
    entry = _entry("alice", "run.trigger", 1)
    params = {"since": "0001-01-01", "until": "9999-12-31"}
    page = viewer_client.get(reverse("scheduler:audit"), params)
    assert page.status_code == 200 and [e.pk for e in page.context["entries"]] == [entry.pk]
    export = viewer_client.get(reverse("scheduler:audit_csv"), params)
    rows = list(csv.reader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert export.status_code == 200 and [r[1] for r in rows[1:]] == ["alice"]


def test_the_report_filters_by_the_owning_team(viewer_client, make_schedule):
    from scheduler.services.access.teams import team_save

    team_save(data={"name": "billing"}, actor="tests")
    make_schedule("orders")
    make_schedule("invoices", owner="billing")
    entries = viewer_client.get(reverse("scheduler:audit"), {"team": "billing"}).context["entries"]
    assert {e.target_repr for e in entries} == {"invoices", "billing"}  # the schedule and the team itself
    response = viewer_client.get(reverse("scheduler:audit"), {"team": "nope"})
    assert "team" in response.context["form"].errors


def test_the_csv_before_and_after_columns_are_json(viewer_client, db):
    import json

    AuditEntry.objects.create(at=datetime(2026, 3, 1, 10, tzinfo=timezone.utc), actor="alice", action="breaker.reset",
                              before={"status": "open", "failures": 3, "ok": False, "x": None},
                              after={"status": "closed", "note": "it's \"back\""})
    _entry("bob", "run.trigger", 2)  # no before or after: empty cells
    response = viewer_client.get(reverse("scheduler:audit_csv"))
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    by_actor = {row["actor"]: row for row in rows}
    assert json.loads(by_actor["alice"]["before"]) == {"status": "open", "failures": 3, "ok": False, "x": None}
    assert json.loads(by_actor["alice"]["after"]) == {"status": "closed", "note": "it's \"back\""}
    assert (by_actor["bob"]["before"], by_actor["bob"]["after"]) == ("", "")
