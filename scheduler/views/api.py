from django.contrib.auth.decorators import login_required, permission_required
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler import selectors


@require_GET
@login_required
@permission_required("scheduler.view_run", raise_exception=True)
def status(request):
    """Read-only JSON status: active runs, queue per class, leases, last governance tick."""
    return JsonResponse(selectors.status_snapshot())
