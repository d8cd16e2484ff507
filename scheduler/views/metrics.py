"""`/metrics` for Prometheus, behind a bearer token."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import Http404, HttpResponse, HttpResponseForbidden
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from scheduler.metrics import render_metrics
from scheduler.views.common import bearer_token


@require_GET
def metrics(request):
    token = settings.ETL_METRICS_TOKEN
    if not token:
        # no token configured: the endpoint does not exist rather than being open
        raise Http404("metrics are disabled: set ETL_METRICS_TOKEN")
    given = bearer_token(request) or ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        return HttpResponseForbidden("metrics: missing or wrong bearer token\n", content_type="text/plain")
    return HttpResponse(render_metrics(), content_type=CONTENT_TYPE_LATEST)
