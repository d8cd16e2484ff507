"""A run's log as the pages read it: the run page's lines, the htmx follower, and the log as text.

Every answer is bounded whatever the run holds (issue 25; the text log since issue 33): a number of lines and of
message characters, read in one statement through a cursor that stops there. The text log gives the lines after
`?after=<seq>` and, when more follow, ends with a line naming the next page (also in a `Link: <...>; rel="next"`
header), so a 150,000-line log is read a page at a time and four readers of it do not hold a worker for seconds.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from scheduler import run_reads
from scheduler.models import Run, RunLogLine
from scheduler.views.common import int_or_none, page

RUN_PAGE_LOG_LINES = 100  # log lines on the run page, and in each answer of the follower or "Next lines"
RUN_PAGE_LOG_CHARS = 30_000  # ... and no more characters of their messages than this (one line may hold 16 KB)
TEXT_LOG_LINES = 5_000  # lines of one answer of the log as text
TEXT_LOG_CHARS = 1_000_000  # ... and characters of their messages (at least one line)
READ_CHUNK = 500  # rows the cursor fetches at a time: reading stops within a chunk of the bound
# The worker stores a run's last lines just after the run's final status
# commits: a follower keeps asking for a few seconds more before it stops.
LOG_GRACE_SECONDS = 10


def log_page(
    run: Run, *, after: int, node: str | None, max_lines: int = RUN_PAGE_LOG_LINES, max_chars: int = RUN_PAGE_LOG_CHARS
) -> tuple[list[RunLogLine], bool]:
    """The log lines after seq `after`: `max_lines` at most and no more than `max_chars` of messages (at least
    one line); and whether more lines follow."""
    lines = RunLogLine.objects.filter(run=run, seq__gt=after)
    if node is not None:
        lines = lines.filter(node=node)
    shown: list[RunLogLine] = []
    chars = 0
    for line in lines.order_by("seq")[: max_lines + 1].iterator(chunk_size=READ_CHUNK):
        chars += len(line.message)
        if len(shown) == max_lines or (shown and chars > max_chars):
            return shown, True
        shown.append(line)
    return shown, False


def log_done(run: Run, now) -> bool:
    return run.is_final and (run.finished_at is None or (now - run.finished_at).total_seconds() > LOG_GRACE_SECONDS)


@page("scheduler.view_run")
def run_log(request, run_id: int):
    """The run's log: new lines for the follower on the run page (htmx), a bounded page of it as text otherwise."""
    run = get_object_or_404(Run.objects.only("id", "status", "stop_requested_at", "finished_at"), pk=run_id)
    after = int_or_none(request.GET.get("after")) or 0
    node = request.GET.get("node") or None
    if not request.htmx:
        return _as_text(run, after=after, node=node)
    lines, more = log_page(run, after=after, node=node)
    context = {
        "run": run,
        "log_lines": lines,
        "last_seq": lines[-1].seq if lines else after,
        "log_done": log_done(run, timezone.now()),
        "oob": True,
        "log_node": node,
        "log_more": more,
    }
    return render(request, "scheduler/run_log_more.html", context)


def _as_text(run: Run, *, after: int, node: str | None) -> HttpResponse:
    lines, more = log_page(run, after=after, node=node, max_lines=TEXT_LOG_LINES, max_chars=TEXT_LOG_CHARS)
    text = "".join(run_reads.log_line_text(line) + "\n" for line in lines)
    response = HttpResponse(content_type="text/plain; charset=utf-8")
    if more:
        query = {"after": lines[-1].seq, **({"node": node} if node is not None else {})}
        following = f"{reverse('scheduler:run_log', args=[run.pk])}?{urlencode(query)}"
        text += f"-- {len(lines)} lines shown; the log goes on at {following} --\n"
        response["Link"] = f'<{following}>; rel="next"'
    response.content = text
    response["Content-Disposition"] = f'inline; filename="run-{run.pk}.log"'
    return response
