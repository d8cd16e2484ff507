"""`manage.py event_token create|list|revoke`: tokens for POST /api/events/<topic>, each of a team or admin-wide.

`create --name N --team T` (or `--all-teams`) prints the token once (only its
hash is kept); `list` shows key ids, names, the team and state (never a
secret); `revoke --key-id ID` ends one. Acts as --actor (default the shell
user): a user makes and revokes tokens only of the teams they belong to.
"""
from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduler.management.cli import dump_json, fail
from scheduler.models import EventToken
from scheduler.services.common.errors import ServiceError
from scheduler.services.access.event_tokens import event_token_create, event_token_get, event_token_revoke
from scheduler.services.access.teams import team_get

FLAGS = {"name": "--name", "team": "--team", "key_id": "--key-id", "reason": "--reason"}


def _describe(token: EventToken) -> dict:
    return {"key_id": token.key_id, "name": token.name, "team": token.team.name if token.team_id else None,
            "all_teams": token.all_teams, "created_at": token.created_at.isoformat(),
            "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
            "state": "revoked" if token.revoked_at else "active"}


class Command(BaseCommand):
    help = ("Create, list and revoke event tokens (POST /api/events/<topic>). A token belongs to one team and "
            "fires only its schedules, or is admin-wide (--all-teams). The token is shown once, at create.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="op", required=True, metavar="OPERATION")
        create = sub.add_parser("create", help="A new token, printed once.")
        create.add_argument("--name", required=True, help="What sends the events (a shop, a CI job).")
        create.add_argument("--team", default=None, help="The team whose schedules it fires.")
        create.add_argument("--all-teams", action="store_true", help="Admin-wide: it fires every team's schedules.")
        sub.add_parser("list", help="Every event token: key id, name, team, last use, state.")
        revoke = sub.add_parser("revoke", help="Revoke one token.")
        revoke.add_argument("--key-id", required=True, help="The token's key id (see list).")
        revoke.add_argument("--reason", default="", help="Why (kept in the audit log).")
        for p in sub.choices.values():
            p.add_argument("--actor", default=None, help="Who does it (default: the shell user).")
            p.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args, **opts):
        actor = "user:" + (opts["actor"] or getpass.getuser())
        try:
            getattr(self, "_" + opts["op"])(actor, opts)
        except ServiceError as exc:
            raise fail(f"{FLAGS.get(exc.field or '', exc.field or 'input')}: {exc.problem}") from None

    def _create(self, actor, opts):
        if bool(opts["team"]) == bool(opts["all_teams"]):
            raise fail("--team: give a team, or --all-teams for an admin-wide token (not both)")
        team = team_get(opts["team"]) if opts["team"] else None
        created = event_token_create(name=opts["name"], team=team, all_teams=opts["all_teams"], actor=actor,
                                     now=timezone.now())
        if opts["json"]:
            dump_json(self.stdout, {**_describe(created.token), "token": created.plaintext})
            return
        self.stdout.write(created.plaintext)
        self.stderr.write(f"event token {created.token.key_id} ({created.token.scope_label}): copy it now, it is "
                          "not shown again. Send it as 'Authorization: Bearer <token>'.")

    def _list(self, actor, opts):
        rows = [_describe(t) for t in EventToken.objects.select_related("team")]
        if opts["json"]:
            dump_json(self.stdout, rows)
            return
        if not rows:
            self.stdout.write("no event tokens")
        for row in rows:
            scope = "all teams" if row["all_teams"] else f"team {row['team']}"
            self.stdout.write(f"{row['key_id']}  {row['state']:<8} {scope:<20} {row['name']}"
                              f"  last used {row['last_used_at'] or 'never'}")

    def _revoke(self, actor, opts):
        token = event_token_get(opts["key_id"])
        changed = event_token_revoke(token=token, actor=actor, reason=opts["reason"])
        if opts["json"]:
            dump_json(self.stdout, {**_describe(token), "changed": changed})
        else:
            self.stdout.write(f"event token {token.key_id} " + ("revoked" if changed else "was already revoked"))
