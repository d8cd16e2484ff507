"""`manage.py connection set|list|show|delete|rotate-key|generate-key`: a team's credentials, used by name.

Secrets are write-only here as at every door: `set` reads a URL holding a
password, or a password, from standard input (`--url-stdin`,
`--password-stdin`), never from the command line, where `ps` would show it;
`list` and `show` say only which secrets are set (`***`). With `--actor USER`
(default: the shell user) the change is made as that user and held to their
permissions. docs/security.md, "Connections".
"""
from __future__ import annotations

import getpass
import sys

from django.core.management.base import BaseCommand

from scheduler.management.cli import dump_json, fail
from scheduler.models import Connection
from scheduler.services.access.connections import (connection_delete, connection_get, connection_set, connection_shown,
                                            connections_rotate_key)
from scheduler.services.common.crypto import generate_key
from scheduler.services.common.errors import ServiceError
from scheduler.services.common.masking import url_secrets


class Command(BaseCommand):
    help = "Manage connections: a team's credentials for a database, an HTTP service or an SMTP server."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="op", required=True, metavar="OPERATION")
        listing = sub.add_parser("list", help="Every connection: name, team, kind, host (secrets shown as ***).")
        listing.add_argument("--json", action="store_true")
        show = sub.add_parser("show", help="One connection's fields (secrets shown as ***).")
        show.add_argument("name")
        show.add_argument("--json", action="store_true")
        put = sub.add_parser("set", help="Create or change a connection (only what is given changes).")
        put.add_argument("name", help="Lower-case letters, digits and _ (the env var is ETL_CONN_<NAME>).")
        put.add_argument("--team", default=None, help="The owning team (on create: default ETL_DEFAULT_TEAM).")
        put.add_argument("--kind", default=None, choices=[c for c, _ in Connection._meta.get_field("kind").choices])
        put.add_argument("--url", default=None, help="Its URL without a password (host, port, database, login).")
        put.add_argument("--url-stdin", action="store_true", help="Read its URL, password included, from stdin.")
        put.add_argument("--password-stdin", action="store_true", help="Read the password from stdin.")
        for field in ("scheme", "host", "port", "database", "login", "description"):
            put.add_argument(f"--{field}", default=None)
        put.add_argument("--extra", action="append", default=None, metavar="KEY=VALUE",
                         help="A field that is not secret (repeat it; replaces the extras): sslmode=require.")
        put.add_argument("--reason", default="")
        delete = sub.add_parser("delete", help="Delete a connection no schedule declares.")
        delete.add_argument("name")
        delete.add_argument("--reason", default="")
        sub.add_parser("rotate-key", help="Re-encrypt every stored secret under the first key of "
                                          "ETL_CONNECTION_KEYS (then the older keys may leave).")
        sub.add_parser("generate-key", help="Print a new Fernet key for ETL_CONNECTION_KEYS.")
        for p in (put, delete, sub.choices["rotate-key"]):
            p.add_argument("--actor", default=None, help="Act as this user (default: the shell user).")

    def handle(self, *args, **opts):
        op = opts["op"]
        actor = "user:" + (opts.get("actor") or getpass.getuser())
        try:
            if op == "generate-key":
                self.stdout.write(generate_key())
            elif op == "list":
                rows = [connection_shown(c) for c in Connection.objects.select_related("owner").order_by("name")]
                if opts["json"]:
                    dump_json(self.stdout, rows)
                for row in [] if opts["json"] else rows:
                    self.stdout.write(f"{row['name']}  {row['owner']}  {row['kind']}  {row['host'] or row['database']}"
                                      f"  password: {row['password'] or '(none)'}")
            elif op == "show":
                shown = connection_shown(connection_get(opts["name"]))
                if opts["json"]:
                    dump_json(self.stdout, shown)
                else:
                    for key, value in shown.items():
                        self.stdout.write(f"{key}: {value}")
            elif op == "set":
                self._set(opts, actor)
            elif op == "delete":
                connection_delete(connection=connection_get(opts["name"]), actor=actor, reason=opts["reason"])
                self.stdout.write(f"connection {opts['name']} deleted")
            elif op == "rotate-key":
                counts = connections_rotate_key(actor=actor)
                self.stdout.write(f"re-encrypted {counts['connections']} connection(s) and "
                                  f"{counts['command_secrets']} command env secret(s) under the first key")
        except ServiceError as exc:
            raise fail(str(exc)) from None

    def _set(self, opts, actor: str) -> None:
        url = opts["url"]
        if url is not None and url_secrets(url):
            raise fail("--url: a URL with a password goes on standard input (--url-stdin), never on the command "
                       "line, where ps shows it")
        if opts["url_stdin"]:
            url = sys.stdin.readline().strip()
        password = sys.stdin.readline().rstrip("\r\n") if opts["password_stdin"] else None
        fields = {f: opts[f] for f in ("scheme", "host", "port", "database", "login", "description")
                  if opts[f] is not None}
        if opts["extra"] is not None:
            pairs = [item.partition("=") for item in opts["extra"]]
            if any(not key or not sep for key, sep, _ in pairs):
                raise fail("--extra: expected KEY=VALUE")
            fields["extra"] = {key: value for key, _, value in pairs}
        connection = connection_set(name=opts["name"], actor=actor, owner=opts["team"], kind=opts["kind"], url=url,
                                    password=password, reason=opts["reason"], **fields)
        self.stdout.write(f"connection {connection.name} saved (team {connection.owner.name}, {connection.kind})")
