from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from scheduler import selectors
from scheduler.models import Run, RunStatus


@login_required
@permission_required("scheduler.view_run", raise_exception=True)
def overview(request):
    context = {
        "running": selectors.active_runs()[:100],
        "queue": selectors.queue_by_class(),
        "health": selectors.governance_health(),
        "recent_failures": Run.objects.filter(status=RunStatus.FAILED).select_related("schedule")[:10],
    }
    template = "scheduler/overview.html#live" if request.htmx else "scheduler/overview.html"
    return render(request, template, context)


@login_required
@permission_required("scheduler.view_run", raise_exception=True)
def run_list(request):
    runs = Run.objects.select_related("schedule", "workload_class").order_by("-id")
    status = request.GET.get("status", "")
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    page = Paginator(runs, 50, count=None).get_page(request.GET.get("page"))
    context = {"page": page, "status": status, "statuses": RunStatus.choices}
    template = "scheduler/runs.html#table" if request.htmx else "scheduler/runs.html"
    return render(request, template, context)


@login_required
@permission_required("scheduler.view_run", raise_exception=True)
def run_detail(request, run_id: int):
    run = get_object_or_404(Run.objects.select_related("schedule", "workload_class"), pk=run_id)
    return render(request, "scheduler/run_detail.html", {"run": run})
