"""The viewer's own API tokens: list, create (shown once), revoke. A section linked from Preferences."""
from __future__ import annotations

from django import forms
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from scheduler.middleware import never_compressed
from scheduler.models import ApiToken
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.tokens import parse_expiry, token_create, token_get, token_revoke
from scheduler.views.common import partial
from scheduler.views.signin import signed_in

TEMPLATE = "scheduler/tokens.html"


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. ci-deploy.")
    expires = forms.CharField(required=False, max_length=20, label="Expires after",
                              help_text="30d, 12h, 90m or 2w; empty: never.")


def _context(request, **extra) -> dict:
    now = timezone.now()
    tokens = [{"token": t, "state": t.state(now)} for t in ApiToken.objects.filter(user=request.user)]
    return {"tokens": tokens, "form": TokenForm(), "created": None, **extra}


@never_compressed
@signed_in
@require_http_methods(["GET", "HEAD", "POST"])
def api_tokens(request):
    """GET lists the viewer's tokens; POST creates one and shows it once."""
    if request.method != "POST":
        return render(request, TEMPLATE, _context(request))
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            expires_at = parse_expiry(form.cleaned_data["expires"], now=timezone.now(), field="expires")
            created = token_create(user=request.user, name=form.cleaned_data["name"], expires_at=expires_at)
        except ServiceError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, exc.problem)
        else:
            return render(request, partial(request, TEMPLATE, "tokens"), _context(request, created=created))
    return render(request, partial(request, TEMPLATE, "tokens"), _context(request, form=form), status=400)


@signed_in
@require_POST
def api_token_revoke(request, key_id: str):
    """Revoke one of the viewer's own tokens (another user's is not found)."""
    try:
        token = token_get(key_id=key_id, user=request.user)
    except ServiceError as exc:
        return render(request, partial(request, TEMPLATE, "tokens"), _context(request, error=exc.problem), status=404)
    token_revoke(token=token, actor=request.user, reason="revoked in the dashboard")
    return render(request, partial(request, TEMPLATE, "tokens"), _context(request, revoked=token.key_id))
