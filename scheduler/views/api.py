from django.contrib.auth.decorators import login_required, permission_required
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from scheduler import selectors
from scheduler.services.access.teams import visible_team_ids


@require_GET
@login_required
@permission_required("scheduler.view_run", raise_exception=True)
def status(request):
    """Read-only JSON status: active runs (of the teams the user may see), queue per class, leases, last tick."""
    return JsonResponse(selectors.status_snapshot(team_ids=visible_team_ids(request.user)))
