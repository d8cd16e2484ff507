"""The log as text answers a bounded page with a link to the next one, and shows terminal escapes escaped
(issue 33: four readers of a 150,000-line log held the login page for seconds)."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from scheduler.models import RunLogLine, RunStatus
from scheduler.views import logs

pytestmark = pytest.mark.django_db
PROBE_LINES = 150_000
ESCAPES = "\x1b[2J\x1b[1;1Hall good\x1b]52;c;Y3VybCBldmlsfHNo\x07\r\x9b31m done"


def _fill(run, n, now, *, message="loaded batch {i} of the orders table into the warehouse", node=""):
    """n lines written by the database itself (150,000 model objects would take the test most of its time)."""
    head, _, tail = message.partition("{i}")
    number = "|| CAST(i AS TEXT) ||" if "{i}" in message else "||"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {RunLogLine._meta.db_table} (run_id, seq, at, level, source, message, node) "
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
            f"SELECT %s, i, %s, 'INFO', 'stdout', %s {number} %s, %s FROM n",
            [n, run.pk, connection.ops.adapt_datetimefield_value(now), head, tail, node],
        )
    assert RunLogLine.objects.filter(run=run).count() == n


def _get(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return response, len(queries)


def test_a_150000_line_log_is_answered_a_bounded_page_at_a_time(viewer_client, make_schedule, make_run, now):
    small = make_run(make_schedule("small"), RunStatus.SUCCEEDED)
    _fill(small, 10, now)
    huge = make_run(make_schedule("huge"), RunStatus.SUCCEEDED)
    _fill(huge, PROBE_LINES, now)
    url = reverse("scheduler:run_log", args=[huge.pk])
    _, baseline = _get(viewer_client, reverse("scheduler:run_log", args=[small.pk]))
    first, statements = _get(viewer_client, url)
    body = first.content.decode()
    shown = [line for line in body.splitlines() if " UTC " in line]
    assert len(shown) == logs.TEXT_LOG_LINES and shown[-1].endswith(
        f"batch {logs.TEXT_LOG_LINES} of the orders table into the warehouse"
    )
    assert statements == baseline  # the same statements for 150,000 lines as for 10: one read of the page's lines
    following = f"{url}?after={logs.TEXT_LOG_LINES}"
    assert first["Link"] == f'<{following}>; rel="next"' and body.endswith(f"the log goes on at {following} --\n")
    last, _ = _get(viewer_client, f"{url}?after={PROBE_LINES - logs.TEXT_LOG_LINES}")
    assert last.content.decode().count(" UTC ") == logs.TEXT_LOG_LINES and "Link" not in last
    assert "goes on" not in last.content.decode()


def test_a_page_is_bounded_by_characters_too(viewer_client, make_schedule, make_run, now):
    run = make_run(make_schedule("wide"), RunStatus.SUCCEEDED)
    _fill(run, 200, now, message="x" * 16_000)
    response, _ = _get(viewer_client, reverse("scheduler:run_log", args=[run.pk]))
    assert response.content.decode().count(" UTC ") == logs.TEXT_LOG_CHARS // 16_000
    assert len(response.content) <= logs.TEXT_LOG_CHARS + 100 * logs.TEXT_LOG_CHARS // 16_000


def test_following_the_next_links_reads_every_line_once_keeping_the_node(
    viewer_client, make_schedule, make_run, now, monkeypatch
):
    monkeypatch.setattr(logs, "TEXT_LOG_LINES", 7)
    run = make_run(make_schedule("walk"), RunStatus.SUCCEEDED)
    _fill(run, 20, now, message="line {i}", node="orders")
    RunLogLine.objects.create(run=run, seq=21, at=now, level="INFO", source="stdout", message="other", node="x")
    url, seen, pages = reverse("scheduler:run_log", args=[run.pk]) + "?node=orders", [], 0
    while url:
        response, _ = _get(viewer_client, url)
        pages += 1
        seen += [line.rsplit(": ", 1)[1] for line in response.content.decode().splitlines() if " UTC " in line]
        url = response["Link"][1:].split(">")[0] if "Link" in response else None
        assert url is None or "node=orders" in url
    assert seen == [f"line {i}" for i in range(1, 21)] and pages == 3


def test_terminal_escapes_are_shown_escaped_in_the_text_log_and_in_run_log(viewer_client, make_schedule, make_run, now):
    run = make_run(make_schedule("shouty"), RunStatus.FAILED, reason=f"command said {ESCAPES}")
    RunLogLine.objects.create(
        run=run, seq=1, at=now - timedelta(seconds=1), level="INFO", source="stdout", message=ESCAPES
    )
    RunLogLine.objects.create(run=run, seq=2, at=now, level="ERROR", source="stderr", message="tab\tand\nnewline")
    text = viewer_client.get(reverse("scheduler:run_log", args=[run.pk])).content.decode()
    out = StringIO()
    call_command("run_log", str(run.pk), stdout=out)
    follow = StringIO()
    call_command("run_log", str(run.pk), "--follow", stdout=follow)
    for shown in (text, out.getvalue(), follow.getvalue()):
        assert "\\x1b[2J\\x1b[1;1Hall good\\x1b]52;c;Y3VybCBldmlsfHNo\\x07\\x0d\\x9b31m done" in shown
        assert not {"\x1b", "\x07", "\r", "\x9b"} & set(shown)
        assert "tab\tand\nnewline" in shown  # a traceback's lines and tabs stay as they are
    assert "command said \\x1b[2J" in follow.getvalue()  # the closing line quotes the reason, escaped too
