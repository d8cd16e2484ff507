"""Small helpers shared by the page views."""

from __future__ import annotations

import shlex
from functools import wraps

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST, require_safe

from scheduler.models import Backfill, Run, Schedule, Team
from scheduler.permissions import member_team_ids
from scheduler.services.worker.dbt import dbt_argv, dbt_spec_check
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.teams import PermissionRefused, authorize, visible_team_ids
from scheduler.services.access.teams import ObjectHidden
from scheduler.views.signin import signed_in

# URL keyword -> the model whose owning team decides an object permission
TARGETS = {"schedule_id": Schedule, "run_id": Run, "backfill_id": Backfill}


def target_of(kwargs: dict):
    """The schedule, run or backfill a URL names (404 when it does not exist), or None."""
    for key, model in TARGETS.items():
        if key in kwargs:
            manager = model.objects if model is Schedule else model.objects.select_related("schedule")
            return get_object_or_404(manager, pk=kwargs[key])
    return None


def require(request, perm: str, obj=None) -> None:
    """403 with the reason, and an audit entry, unless the user holds `perm` (on `obj`'s team when given); 404, as
    for a missing object, when viewing is scoped and `obj` is another team's."""
    try:
        authorize(actor=request.user, perm=perm, obj=obj)
    except ObjectHidden:
        raise Http404() from None
    except PermissionRefused as exc:
        raise PermissionDenied(str(exc)) from None


def can(perm: str):
    """Login required (anonymous -> login page; an htmx request -> 401 + HX-Redirect, views/signin.py), then the
    permission (missing -> 403).

    When the URL names a schedule, run or backfill, the permission must also hold on it:
    an operator acts only on schedules of a team they belong to (scheduler.permissions).
    """

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(perm):
                require(request, perm)
            target = target_of(kwargs)
            if target is not None:
                require(request, perm, target)
            return view(request, *args, **kwargs)

        return signed_in(wrapped)

    return decorator


def page(perm: str):
    """A read-only page: GET or HEAD only, login, then the permission."""

    def decorator(view):
        return require_safe(can(perm)(view))

    return decorator


def action(perm: str):
    """A POST-only state change: login, permission, CSRF (by the middleware)."""

    def decorator(view):
        return require_POST(can(perm)(view))

    return decorator


def int_or_none(value) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def team_scope(request) -> dict:
    """Which teams a list shows: `?team=mine|all|<name>`; by default "mine" for a member of a team, else "all".

    Never wider than what the user may see (ETL_TEAMS_VIEW_ALL). An unknown team name shows every
    visible team and says so (`team_error`), rather than an empty page.
    """
    mine = member_team_ids(request.user)
    visible = visible_team_ids(request.user)
    teams = [t for t in Team.objects.order_by("name").only("id", "name") if visible is None or t.pk in visible]
    choice = request.GET.get("team") or ("mine" if mine else "all")
    error = ""
    if choice == "mine":
        ids = mine if visible is None else mine & visible
    elif choice == "all":
        ids = visible
    else:
        match = next((t for t in teams if t.name == choice), None)
        if match is None:
            error = f"team: no team named '{choice}' that you may see; showing every team"
            choice, ids = "all", visible
        else:
            ids = frozenset({match.pk})
    return {"team_ids": ids, "team_choice": choice, "team_options": teams, "team_error": error}


def partial(request, template: str, name: str) -> str:
    """The named partial for htmx requests, the whole page otherwise."""
    return f"{template}#{name}" if request.htmx else template


def bearer_token(request) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; the scheme is case-insensitive (RFC 7235).

    None when there is no Authorization header; "" when it is there but not a bearer token.
    """
    header = request.headers.get("Authorization")
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def dbt_command_context(spec: dict | None) -> dict:
    """A dbt target shown as the command it runs: `dbt build` with its flags, the per-run paths and vars named."""
    try:
        spec = dbt_spec_check(spec or {})
    except ServiceError:
        return command_context({})
    runs = settings.ETL_DBT_RUNS_DIR
    argv = dbt_argv(spec=spec, variables={}, target_path=f"{runs}/run-<id>/attempt-<n>/target",
                    log_path=f"{runs}/run-<id>/attempt-<n>/logs")
    argv[argv.index("--vars") + 1] = "<window, run facts and params as JSON>"
    return command_context({"argv": argv, "cwd": spec["project_dir"]})


COMMAND_HEAD_CHARS = 100


def command_context(spec: dict | None) -> dict:
    """A command target as the run page and the schedule page show it: the line, its cwd, its env names."""
    spec = spec or {}
    if "argv" in spec:
        line, form = shlex.join(str(a) for a in spec["argv"] or []), "argv"
    else:
        line, form = str(spec.get("shell", "")), "shell"
    lines = line.splitlines() or [""]
    # a long script is folded behind its first line: the run's facts and actions come first (issue 37)
    long = len(lines) > 1 or len(line) > COMMAND_HEAD_CHARS
    head = lines[0][:COMMAND_HEAD_CHARS] + ("…" if long else "")
    return {"line": line, "form": form, "argv": spec.get("argv"), "cwd": spec.get("cwd", ""),
            "env_names": sorted(spec.get("env") or {}), "long": long, "head": head, "line_count": len(lines)}
