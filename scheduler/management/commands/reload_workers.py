"""`reload_workers [--cluster NAME] [--reason TEXT] [--json]`: ask the running clusters to roll out new code.

Each cluster asked finishes its running runs, then starts again on the code installed on its machine (the same as
SIGHUP to its main process; docs/your-code.md, "Rolling out code"). Clusters notice newer code by themselves
within ETL_CODE_CHECK_SECONDS; this is for a change they cannot see (a new setting, a package installed elsewhere
on PYTHONPATH) or for not waiting.
"""
import getpass

from django.core.management.base import BaseCommand

from scheduler.management.cli import dump_json, fail
from scheduler.services.admission.clusters import clusters_reload
from scheduler.services.common.errors import ServiceError


class Command(BaseCommand):
    help = "Ask the running clusters (or one, --cluster) to finish their running runs and restart their workers."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", default=None, help="Only the clusters started with this --name.")
        parser.add_argument("--reason", default="", help="Why (kept in the audit log).")
        parser.add_argument("--actor", default=None, help="Who asks (default: the shell user), for the audit log.")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        try:
            asked = clusters_reload(actor="user:" + (opts["actor"] or getpass.getuser()), name=opts["cluster"],
                                    reason=opts["reason"])
        except ServiceError as exc:
            raise fail(f"--{exc.field}: {exc.problem}") from None
        if opts["json"]:
            dump_json(self.stdout, {"asked": [{"cluster": c.name, "holder": c.holder, "host": c.host,
                                               "code_version": c.code_version} for c in asked]})
            return
        if not asked:
            self.stdout.write("no cluster is running: nothing to reload (a cluster started now runs the code "
                              "installed now)")
            return
        for c in asked:
            self.stdout.write(f"asked {c.name} on {c.host} (pid {c.pid}, running {c.code_version}) to restart "
                              "its workers once its running runs end")
