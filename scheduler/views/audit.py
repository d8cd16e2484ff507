"""Audit reports: filter, counts, CSV export."""

from __future__ import annotations

import csv
import json

from django.http import StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone

from scheduler import audit_reads
from scheduler.services.history.prune import retention_summary
from scheduler.views.common import int_or_none, page
from scheduler.services.access.teams import visible_team_ids
from scheduler.views.forms import AuditFilterForm, scoped

PAGE_SIZE = 100
CSV_COLUMNS = [
    "at",
    "actor",
    "actor_kind",
    "action",
    "target_type",
    "target_id",
    "target_repr",
    "reason",
    "before",
    "after",
    "via",  # last, so the columns scripts read by position stay where they were
]


def _filters(request):
    form = scoped(AuditFilterForm(request.GET or None), request.user)
    if form.is_bound:
        form.is_valid()  # a bad field is shown with its error and left out; the valid ones still filter
    # viewing scoped: only the entries of the reader's teams, and the reader's own
    return form, form.filters(), {"team_ids": visible_team_ids(request.user), "own_actor": request.user.get_username()}


def _filtered(request):
    form, filters, scope = _filters(request)
    return form, audit_reads.audit_filtered(filters, **scope)


@page("scheduler.view_auditentry")
def audit_report(request):
    form, filters, scope = _filters(request)
    qs = audit_reads.audit_filtered(filters, **scope)
    before = int_or_none(request.GET.get("before"))
    page_qs = qs.filter(id__lt=before) if before else qs
    # (id) order rather than (at, id): ids grow with time and the pk index makes the cursor cheap
    redact = audit_reads.audit_redactor(scope["team_ids"])
    entries = [redact(e) for e in page_qs.order_by("-id")[: PAGE_SIZE + 1]]
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "form": form,
        "entries": entries[:PAGE_SIZE],
        "counts": audit_reads.audit_counts(filters, now=timezone.now(), **scope),
        "older": entries[PAGE_SIZE - 1].id if len(entries) > PAGE_SIZE else None,
        "query": query.urlencode(),
        "retention": retention_summary(),  # how far back the log and the runs go (no longer on the overview)
    }
    return render(request, "scheduler/audit.html", context)


JSON_COLUMNS = {"before", "after"}


def json_cell(value) -> str:
    """A before/after value as JSON (what a script parses), not Python's repr; empty when there is none."""
    return "" if value is None else json.dumps(value, ensure_ascii=False, default=str)


def csv_row(entry) -> list[str]:
    """One audit entry as a CSV row (the page's export and the API's): JSON before/after, formulas defused."""
    return [entry.at.isoformat(), *(csv_safe(json_cell(getattr(entry, c)) if c in JSON_COLUMNS else getattr(entry, c))
                                    for c in CSV_COLUMNS[1:])]


class _Echo:
    def write(self, value):
        return value


def csv_safe(value) -> str:
    # a cell starting with = + - @ is a formula to spreadsheet programs
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


@page("scheduler.view_auditentry")
def audit_csv(request):
    _form, qs = _filtered(request)
    redact = audit_reads.audit_redactor(visible_team_ids(request.user))
    writer = csv.writer(_Echo())

    def rows():
        yield writer.writerow(CSV_COLUMNS)
        for entry in qs.order_by("-id").iterator(chunk_size=2000):
            entry = redact(entry)
            yield writer.writerow(csv_row(entry))

    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    return response
