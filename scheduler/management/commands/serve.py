"""`serve`: the web server and a cluster together in the foreground; Ctrl-C stops both cleanly."""
import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand

from scheduler.management.cli import check_number


class Command(BaseCommand):
    help = "Run the web server (runserver) and a qcluster together; Ctrl-C or SIGTERM stops both."

    def add_arguments(self, parser):
        parser.add_argument("--addr", default=os.environ.get("ETL_ADDR", "127.0.0.1:8000"))
        parser.add_argument("--grace", type=float, default=30.0, help="Seconds to wait for a clean stop.")

    def handle(self, *args, **opts):
        check_number(opts["grace"], option="--grace")
        manage = [sys.executable, sys.argv[0]] if sys.argv[0].endswith("manage.py") else [sys.executable, "manage.py"]
        procs = {
            "web": subprocess.Popen([*manage, "runserver", "--noreload", opts["addr"]]),
            "cluster": subprocess.Popen([*manage, "qcluster"]),
        }
        self.stdout.write(self.style.SUCCESS(f"web on http://{opts['addr']}/  ·  cluster started  ·  Ctrl-C stops both"))
        stopping = {"at": None}

        def stop(signum, frame):
            if stopping["at"] is None:
                stopping["at"] = time.monotonic()
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        code = 0
        while any(p.poll() is None for p in procs.values()):
            for name, proc in procs.items():
                if proc.poll() is not None and stopping["at"] is None:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping the rest")
                    code = proc.returncode or 1
                    stop(signal.SIGTERM, None)
            if stopping["at"] is not None and time.monotonic() - stopping["at"] > opts["grace"]:
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.kill()
            time.sleep(0.2)
        self.stdout.write("stopped")
        if code:
            sys.exit(code)
