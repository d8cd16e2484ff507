"""`manage.py team list|show|create|update|delete|add-member|remove-member|assign|rotate-secret`.

Teams own schedules; their members act on them (as their group allows) and
their channels hear the schedules' alerts. Every change is audited; with
`--actor USER` (default: the shell user) the change is made as that user and held to their
permissions; a name that is no user is trusted as the shell is.
"""
from __future__ import annotations

import getpass

from django.core.management.base import BaseCommand

from scheduler.core import EtlError
from scheduler.management.cli import dump_json, fail
from scheduler.models import Schedule, Team
from scheduler.services.access import teams as team_services
from scheduler.services.oversight.alerts import webhook_to_channel
from scheduler.services.integrations.channels import mask_url, split_channels
from scheduler.services.definitions.schedules import schedule_check_managed, schedule_get, schedule_save


def _describe(team: Team) -> dict:
    return {
        "name": team.name,
        "description": team.description,
        "members": sorted(team.members.values_list("username", flat=True)),
        "schedules": sorted(Schedule.objects.filter(owner=team).values_list("name", flat=True)),
        # masked: a channel URL may carry a token or a password
        "alert_channels": [mask_url(u) for u in split_channels(team.alert_channels, field="alert_channels")],
        "webhook_secret_set": bool(team.alert_webhook_secret),
    }


class Command(BaseCommand):
    help = "Manage teams: who owns which schedules, who may act on them, where their alerts go."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="op", required=True, metavar="OPERATION")
        sub.add_parser("list", help="Every team with its members and schedule count.")
        show = sub.add_parser("show", help="One team: members, schedules, alert channels.")
        show.add_argument("team")
        for name in ("create", "update"):
            p = sub.add_parser(name, help=f"{name.capitalize()} a team.")
            p.add_argument("team", help="Team name (letters, digits, - and _).")
            p.add_argument("--description", default=None)
            p.add_argument("--channel", action="append", default=None, metavar="URL",
                           help="An Apprise URL for the team's alerts (repeat it; replaces the list): mailto://, "
                                "slack://, workflows://, ntfy://, json://, etlhooks:// (signed with the team's "
                                "secret). See docs/notifications.md.")
            p.add_argument("--no-channels", action="store_true", help="Remove every alert channel.")
            p.add_argument("--emails", default=None,
                           help="Shorthand: comma-separated addresses, added as mailto:// channels.")
            p.add_argument("--webhook-url", default=None,
                           help="Shorthand: an http(s) URL, added as a signed etlhook(s):// channel.")
            if name == "update":
                p.add_argument("--rename", default=None, help="New name.")
        delete = sub.add_parser("delete", help="Delete a team that owns no schedules.")
        delete.add_argument("team")
        for name in ("add-member", "remove-member"):
            p = sub.add_parser(name, help=f"{name.replace('-', ' ').capitalize()}(s) by user name.")
            p.add_argument("team")
            p.add_argument("users", nargs="+", metavar="USER")
        assign = sub.add_parser("assign", help="Make the team the owner of schedules.")
        assign.add_argument("team")
        assign.add_argument("schedules", nargs="+", metavar="SCHEDULE")
        rotate = sub.add_parser("rotate-secret", help="A new secret for the team's alert webhook, shown once.")
        rotate.add_argument("team")
        for p in sub.choices.values():
            p.add_argument("--reason", default="", help="Why (kept in the audit log).")
            p.add_argument("--actor", default=None, help="Who makes the change (default: the shell user); a user "
                                                       "is held to their permissions and teams.")
            p.add_argument("--json", action="store_true", help="Machine-readable output.")

    def handle(self, *args, **opts):
        opts["actor"] = "user:" + (opts["actor"] or getpass.getuser())
        try:
            result = getattr(self, "op_" + opts["op"].replace("-", "_"))(opts)
        except EtlError as exc:
            raise fail(str(exc)) from None
        if opts["json"]:
            dump_json(self.stdout, result)

    def say(self, opts, text: str) -> None:
        if not opts["json"]:
            self.stdout.write(text)

    # --- operations -----------------------------------------------------------

    def op_list(self, opts):
        teams = [_describe(t) for t in Team.objects.order_by("name")]
        for t in teams:
            self.say(opts, f"{t['name']:<24} {len(t['schedules']):>4} schedule(s)  members: "
                           f"{', '.join(t['members']) or '-'}")
        return teams

    def op_show(self, opts):
        data = _describe(team_services.team_get(opts["team"]))
        for key in ("name", "description", "members", "schedules", "alert_channels"):
            value = data[key]
            self.say(opts, f"{key:<18} {', '.join(value) if isinstance(value, list) else value or '-'}")
        return data

    def _fields(self, opts, team: Team | None = None) -> dict:
        data = {}
        for option, field in (("description", "description"), ("rename", "name")):
            if opts.get(option) is not None:
                data[field] = opts[option]
        shorthand = [f"mailto://{a.strip()}" for a in (opts.get("emails") or "").split(",") if a.strip()]
        if opts.get("webhook_url"):
            shorthand.append(webhook_to_channel(opts["webhook_url"]))
        if opts.get("no_channels") or opts.get("channel") is not None or shorthand:
            if opts.get("no_channels"):
                urls = []
            elif opts.get("channel") is not None:
                urls = list(opts["channel"])
            else:  # the shorthands add to what the team has
                urls = split_channels(team.alert_channels, field="alert_channels") if team else []
            data["alert_channels"] = urls + shorthand
        return data

    def op_create(self, opts):
        team = team_services.team_save(data={"name": opts["team"], **self._fields(opts)}, actor=opts["actor"],
                                       reason=opts["reason"])
        self.say(opts, f"team '{team.name}' created")
        if team.alert_webhook_secret:
            self.say(opts, f"alert webhook secret (shown once, give it to the receiver):\n{team.alert_webhook_secret}")
        return {**_describe(team), "webhook_secret": team.alert_webhook_secret or None}

    def op_update(self, opts):
        team = team_services.team_get(opts["team"])
        had_secret = bool(team.alert_webhook_secret)
        team = team_services.team_save(data=self._fields(opts, team), team=team, actor=opts["actor"],
                                       reason=opts["reason"])
        self.say(opts, f"team '{team.name}' updated")
        new_secret = team.alert_webhook_secret if team.alert_webhook_secret and not had_secret else None
        if new_secret:
            self.say(opts, f"alert webhook secret (shown once, give it to the receiver):\n{new_secret}")
        return {**_describe(team), "webhook_secret": new_secret}

    def op_delete(self, opts):
        team = team_services.team_get(opts["team"])
        team_services.team_delete(team=team, actor=opts["actor"], reason=opts["reason"])
        self.say(opts, f"team '{opts['team']}' deleted")
        return {"deleted": opts["team"]}

    def op_add_member(self, opts):
        return self._members(opts, add=opts["users"])

    def op_remove_member(self, opts):
        return self._members(opts, remove=opts["users"])

    def _members(self, opts, **change):
        team = team_services.team_get(opts["team"])
        members = team_services.team_set_members(team=team, actor=opts["actor"], reason=opts["reason"], **change)
        self.say(opts, f"members of '{team.name}': {', '.join(members) or '-'}")
        return {"team": team.name, "members": members}

    def op_assign(self, opts):
        team = team_services.team_get(opts["team"])
        schedules = [schedule_get(name) for name in opts["schedules"]]  # all known before any changes
        for schedule in schedules:
            team_services.authorize_owner_change(actor=opts["actor"], schedule=schedule, team=team)
            schedule_check_managed(schedule=schedule, data={"owner": team})  # a file's: refused before any change
        for schedule in schedules:
            schedule_save(data={"owner": team}, schedule=schedule, actor=opts["actor"],
                          reason=opts["reason"] or f"assigned to team {team.name}")
            self.say(opts, f"'{schedule.name}' now belongs to '{team.name}'")
        return {"team": team.name, "assigned": [s.name for s in schedules]}

    def op_rotate_secret(self, opts):
        team = team_services.team_get(opts["team"])
        secret = team_services.team_rotate_secret(team=team, actor=opts["actor"], reason=opts["reason"])
        self.say(opts, f"new alert webhook secret for '{team.name}' (shown once, give it to the receiver):\n{secret}")
        return {"team": team.name, "webhook_secret": secret}
