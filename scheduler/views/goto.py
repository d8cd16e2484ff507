"""The header's "go to run #" box: a number opens that run's page (a styled 404 when it is gone)."""
from __future__ import annotations

from django.shortcuts import redirect, render

from scheduler.views.common import page


@page("scheduler.view_run")
def run_goto(request):
    """`?run=4213` (or `#4213`) -> the run's page; no number: the box on a page of its own; anything else: 400,
    the field named."""
    text = (request.GET.get("run") or "").strip().lstrip("#").strip()
    if text.isdigit() and 0 < int(text) < 2**63:
        return redirect("scheduler:run_detail", run_id=int(text))
    error = f"run: expected a run number such as 4213, got '{text[:40]}'" if text else ""
    return render(request, "scheduler/run_goto.html", {"error": error, "text": text}, status=400 if error else 200)
