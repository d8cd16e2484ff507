"""`manage.py api_token create|list|revoke --user NAME`: REST API tokens from a shell.

`create` prints the token once (only its hash is kept); `list` shows key ids,
names, expiry and state (never a secret); `revoke --key-id ID` ends one.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduler.management.cli import dump_json, fail
from scheduler.models import ApiToken
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.tokens import parse_expiry, token_create, token_get, token_revoke


def _describe(token: ApiToken, now) -> dict:
    return {"key_id": token.key_id, "name": token.name, "user": token.user.get_username(),
            "created_at": token.created_at.isoformat(),
            "expires_at": token.expires_at.isoformat() if token.expires_at else None,
            "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
            "state": token.state(now)}


class Command(BaseCommand):
    help = "Create, list and revoke a user's REST API tokens (the token is shown once, at create)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="op", required=True, metavar="OPERATION")
        create = sub.add_parser("create", help="A new token for the user, printed once.")
        create.add_argument("--name", required=True, help="What the token is for (a CI job, a script).")
        create.add_argument("--expires", default=None, help="Lifetime: 30d, 12h, 90m, 2w (default: never).")
        sub.add_parser("list", help="The user's tokens: key id, name, expiry, last use, state.")
        revoke = sub.add_parser("revoke", help="Revoke one of the user's tokens.")
        revoke.add_argument("--key-id", required=True, help="The token's key id (see list).")
        revoke.add_argument("--reason", default="", help="Why (kept in the audit log).")
        for p in sub.choices.values():
            p.add_argument("--user", required=True, help="The user whose tokens these are.")
            p.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args, **opts):
        name = opts["user"]
        user = get_user_model().objects.filter(username=name).first() if "\x00" not in name else None
        if user is None:
            raise fail(f"--user: no user named {name!r}")
        now = timezone.now()
        try:
            getattr(self, "_" + opts["op"])(user, opts, now)
        except ServiceError as exc:
            flag = {"expires_at": "--expires", "expires": "--expires", "name": "--name", "key_id": "--key-id",
                    "reason": "--reason", "user": "--user"}.get(exc.field or "", exc.field or "input")
            raise fail(f"{flag}: {exc.problem}") from None

    def _create(self, user, opts, now):
        expires_at = parse_expiry(opts["expires"], now=now, field="expires")
        created = token_create(user=user, name=opts["name"], expires_at=expires_at, actor="cli", now=now)
        if opts["json"]:
            dump_json(self.stdout, {**_describe(created.token, now), "token": created.plaintext})
            return
        self.stdout.write(created.plaintext)
        self.stderr.write(f"token {created.token.key_id} for {user.get_username()}: copy it now, it is not shown "
                          "again. Send it as 'Authorization: Bearer <token>'.")

    def _list(self, user, opts, now):
        rows = [_describe(t, now) for t in ApiToken.objects.filter(user=user).select_related("user")]
        if opts["json"]:
            dump_json(self.stdout, rows)
            return
        if not rows:
            self.stdout.write(f"{user.get_username()} has no API tokens")
        for row in rows:
            self.stdout.write(f"{row['key_id']}  {row['state']:<8} {row['name']}"
                              f"  expires {row['expires_at'] or 'never'}  last used {row['last_used_at'] or 'never'}")

    def _revoke(self, user, opts, now):
        token = token_get(key_id=opts["key_id"], user=user)
        changed = token_revoke(token=token, actor="cli", reason=opts["reason"], now=now)
        if opts["json"]:
            dump_json(self.stdout, {**_describe(token, now), "changed": changed})
        else:
            self.stdout.write(f"token {token.key_id} " + ("revoked" if changed else "was already revoked"))
