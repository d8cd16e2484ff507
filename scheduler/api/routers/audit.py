"""/api/v1/audit: the audit log filtered (keyset pages), and exported as CSV or JSON Lines (streamed, bounded)."""
from __future__ import annotations

import csv
import json
from datetime import datetime
from typing import Literal

from django.http import StreamingHttpResponse
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from scheduler import audit_reads
from scheduler.api.common import MAX_LIMIT, aware, caller, errors, require
from scheduler.api.schemas import AuditPage
from scheduler.models import AuditEntry
from scheduler.services.common.errors import NotFound
from scheduler.services.access.teams import team_get, visible_team_ids
from scheduler.views.audit import CSV_COLUMNS, csv_row

router = Router(tags=["audit"])
EXPORT_MAX = 100_000


class AuditFilters(Schema):
    actor: str | None = Field(default=None, max_length=150)
    action: str | None = Field(default=None, max_length=64, description="A prefix: breaker. or run.trigger")
    target: str | None = Field(default=None, max_length=200, description="type:id (schedule:3) or part of its name")
    team: str | None = Field(default=None, max_length=100, description="The team that owned the target then.")
    since: datetime | None = None
    until: datetime | None = None


def _filtered(filters: AuditFilters, request):
    for name in ("actor", "action", "target", "team"):
        if "\x00" in (getattr(filters, name) or ""):
            raise NotFound("must not contain the NUL character", field=name)
    wanted = {"actor": filters.actor, "action": filters.action, "target": filters.target,
              "since": aware(filters.since, "since"), "until": aware(filters.until, "until")}
    if filters.team:
        wanted["team"] = team_get(filters.team, visible=visible_team_ids(caller(request)))
    # viewing scoped: only the entries of the caller's teams, and the caller's own
    user = caller(request)
    return audit_reads.audit_filtered({k: v for k, v in wanted.items() if v}, team_ids=visible_team_ids(user),
                                    own_actor=user.get_username())


def entry_out(entry: AuditEntry) -> dict:
    return {"id": entry.pk, "at": entry.at, "actor": entry.actor, "actor_kind": entry.actor_kind, "via": entry.via,
            "action": entry.action, "target_type": entry.target_type, "target_id": entry.target_id,
            "target_repr": entry.target_repr, "reason": entry.reason, "before": entry.before, "after": entry.after}


class Page(AuditFilters):
    cursor: int | None = Field(default=None, ge=1, description="The `next` of the previous page.")
    limit: int = Field(default=100, ge=1, le=MAX_LIMIT)


@router.get("/audit", response={200: AuditPage, **errors()}, summary="The audit log, newest first")
def list_audit(request, query: Query[Page]):
    require(request, "scheduler.view_auditentry")
    qs = _filtered(query, request)
    if query.cursor:
        qs = qs.filter(id__lt=query.cursor)
    rows = list(qs.order_by("-id")[: query.limit + 1])
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    redact = audit_reads.audit_redactor(visible_team_ids(caller(request)))
    return {"items": [entry_out(redact(e)) for e in rows], "next": rows[-1].pk if more and rows else None}


class Export(AuditFilters):
    format: Literal["csv", "jsonl"] = "csv"
    limit: int = Field(default=10_000, ge=1, le=EXPORT_MAX, description=f"At most {EXPORT_MAX} entries, newest first.")


class _Echo:
    def write(self, value):
        return value


EXPORT_RESPONSE = {
    "200": {
        "description": "The entries, streamed (CSV with a header row, or one JSON object a line)",
        "content": {"text/csv": {"schema": {"type": "string"}},
                    "application/x-ndjson": {"schema": {"type": "string"}}},
    }
}


@router.get("/audit/export", response=errors(), summary="Export the audit log (CSV or JSON Lines)",
            openapi_extra={"responses": EXPORT_RESPONSE})
def export_audit(request, query: Query[Export]):
    require(request, "scheduler.view_auditentry")
    entries = _filtered(query, request).order_by("-id")[: query.limit]
    redact = audit_reads.audit_redactor(visible_team_ids(caller(request)))
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    if query.format == "jsonl":
        def lines():
            for entry in entries.iterator(chunk_size=2000):
                data = entry_out(redact(entry))
                data["at"] = entry.at.isoformat()
                yield json.dumps(data, default=str) + "\n"

        response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.jsonl"'
        return response
    writer = csv.writer(_Echo())

    def rows():
        yield writer.writerow(CSV_COLUMNS)
        for entry in map(redact, entries.iterator(chunk_size=2000)):
            yield writer.writerow(csv_row(entry))

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    return response


