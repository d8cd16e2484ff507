"""Teams: a team's page (members, schedules, alert channels) and the channel test buttons."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from scheduler.models import Schedule, Team
from scheduler.services.oversight.channel_probe import channel_test_send
from scheduler.services.integrations.channels import mask_url, split_channels
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import visible_team_ids
from scheduler.views.common import action, page


def channel_rows(owner) -> list[dict]:
    """The channels of a team or a schedule as pages show them: masked, with their index for the test button."""
    return [{"index": i, "shown": mask_url(url), "scheme": url.split("://", 1)[0].lower()}
            for i, url in enumerate(split_channels(owner.alert_channels, field="alert_channels"))]


@page("scheduler.view_team")
def team_detail(request, team_id: int):
    visible = visible_team_ids(request.user)
    team = get_object_or_404(Team.objects.all() if visible is None else Team.objects.filter(pk__in=visible),
                             pk=team_id)
    return render(request, "scheduler/team_detail.html", {
        "team": team, "channels": channel_rows(team),
        "members": list(team.members.order_by("username").values_list("username", flat=True)),
        "schedules": list(Schedule.objects.filter(owner=team).order_by("name").only("id", "name")),
    })


def answer_test(request, *, target, index: int, back: str):
    """Send the test and answer inline (htmx) or with a message on the page it came from."""
    try:
        result = channel_test_send(target=target, index=index, actor=request.user)
    except ServiceError as exc:
        result = {"index": index, "ok": False, "error": str(exc), "channel": ""}
        status = 404 if exc.field == "channel" else 403
    else:
        status = 200
    if request.htmx:
        return render(request, "scheduler/_channel_test.html", {"result": result}, status=status)
    if result["ok"]:
        messages.success(request, f"Test notification sent to {result['channel']}.")
    else:
        messages.error(request, f"Test notification failed: {result['error']}")
    return redirect(back)


@action("scheduler.change_team")
def team_channel_test(request, team_id: int, index: int):
    team = get_object_or_404(Team, pk=team_id)
    # the team's admin page sends its test from inside its own form (formaction) and is answered there
    page_back = ("admin:scheduler_team_change" if request.POST.get("back") == "admin" else "scheduler:team_detail")
    return answer_test(request, target=team, index=index, back=reverse(page_back, args=[team.pk]))
