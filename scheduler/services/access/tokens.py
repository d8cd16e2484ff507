"""Per-user API tokens: created (shown once), checked on every API request, revoked.

A token reads `etl_<key_id>_<secret>`. The key id is public (the token list, the
audit log's "via API token <key_id>"); only a SHA-256 of the secret is stored
and compared in constant time. A token acts with exactly its user's
permissions and teams: the API passes the user to the services as the actor.
"""
from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from scheduler.models import ApiToken
from scheduler.services.common.audit import audit_record
from scheduler.services.common.errors import NotFound, ServiceError, check_text

PREFIX = "etl"
TOKEN_RE = re.compile(r"^etl_([a-z0-9]{8,16})_([A-Za-z0-9_-]{20,100})$")
DURATION_RE = re.compile(r"^\s*(\d{1,6})\s*([mhdw])\s*$")
UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
LAST_USED_EVERY = timedelta(minutes=1)  # at most one UPDATE a minute per token, however busy it is
MAX_TOKEN_LENGTH = 200


class TokenRefused(ServiceError):
    """The token is unknown, expired or revoked (a 401 on the API)."""


@dataclass(frozen=True)
class Created:
    token: ApiToken
    plaintext: str  # shown once, never stored


def secret_hash(secret: str) -> str:
    """What a token store keeps of a secret (API and event tokens alike): its SHA-256, never the secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def parse_expiry(text: Any, *, now: datetime, field: str = "expires") -> datetime | None:
    """'30d', '12h', '90m', '2w' from now; empty or 'never' for no expiry."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "never")):
        return None
    match = DURATION_RE.match(str(text))
    if not match or int(match.group(1)) == 0:
        raise ServiceError(f"must be a duration such as 30d, 12h, 90m or 2w (or 'never'), got {text!r}", field=field)
    return now + timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def token_create(*, user, name: str, expires_at: datetime | None = None, actor: Any = None,
                 now: datetime | None = None) -> Created:
    """A new token of `user`; the plaintext is in the result only."""
    now = now or timezone.now()
    name = check_text(name, field="name", max_length=100).strip()
    if not name:
        raise ServiceError("a name is required (what the token is for)", field="name")
    if expires_at is not None and expires_at <= now:
        raise ServiceError("must be in the future", field="expires_at")
    if not user.is_active:
        raise ServiceError(f"user {user.get_username()} is not active", field="user")
    secret = secrets.token_urlsafe(32)
    with transaction.atomic():
        key_id = secrets.token_hex(5)
        while ApiToken.objects.filter(key_id=key_id).exists():  # 40 bits: a clash is rare, never fatal
            key_id = secrets.token_hex(5)
        token = ApiToken.objects.create(user=user, name=name, key_id=key_id, secret_hash=secret_hash(secret),
                                        created_at=now, expires_at=expires_at)
        audit_record(actor=actor if actor is not None else user, action="token.create", target=token,
                     after={"user": user.get_username(), "name": name, "key_id": key_id,
                            "expires_at": expires_at.isoformat() if expires_at else None}, at=now)
    return Created(token=token, plaintext=f"{PREFIX}_{key_id}_{secret}")


def token_revoke(*, token: ApiToken, actor: Any, reason: str = "", now: datetime | None = None) -> bool:
    """Revoke `token`; False when it was revoked already (nothing changes)."""
    now = now or timezone.now()
    reason = check_text(reason, field="reason", max_length=500)
    with transaction.atomic():
        changed = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=now)
        if changed:
            token.revoked_at = now
            audit_record(actor=actor, action="token.revoke", target=token,
                         after={"user": token.user.get_username(), "key_id": token.key_id}, reason=reason, at=now)
    return bool(changed)


def token_get(*, key_id: str, user=None) -> ApiToken:
    """The token of that key id (of `user` when given)."""
    qs = ApiToken.objects.select_related("user")
    if user is not None:
        qs = qs.filter(user=user)
    found = qs.filter(key_id=key_id).first() if isinstance(key_id, str) and "\x00" not in key_id else None
    if found is None:
        raise NotFound(f"no token with key id {key_id!r}" + (f" of user {user.get_username()}" if user else ""),
                       field="key_id")
    return found


def token_authenticate(raw: str, *, now: datetime | None = None) -> ApiToken:
    """The live token `raw` stands for, its user loaded; TokenRefused says why not."""
    now = now or timezone.now()
    match = TOKEN_RE.match(raw or "") if len(raw or "") <= MAX_TOKEN_LENGTH else None
    if match is None:
        raise TokenRefused("malformed token: expected etl_<key id>_<secret>", field="token")
    token = ApiToken.objects.select_related("user").filter(key_id=match.group(1)).first()
    # compare even when the key id is unknown, so timing does not tell a known key id from an unknown one
    expected = token.secret_hash if token is not None else secret_hash("")
    if not hmac.compare_digest(expected, secret_hash(match.group(2))) or token is None:
        raise TokenRefused("unknown token", field="token")
    if token.revoked_at is not None:
        raise TokenRefused(f"token {token.key_id} was revoked", field="token")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused(f"token {token.key_id} expired at {token.expires_at.isoformat()}", field="token")
    if not token.user.is_active:
        raise TokenRefused(f"the user of token {token.key_id} is not active", field="token")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_EVERY:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
