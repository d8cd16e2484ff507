"""`serve`: the web server (gunicorn) and a cluster together in the foreground; Ctrl-C stops both cleanly.

This is how `make run` brings the product up, and how the browser tests start it:
static files are collected and then served by WhiteNoise with DEBUG off, the web
side runs on gunicorn (not the development server).
"""
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from scheduler.core.timing import shutdown_bound
from scheduler.models import LoopLease
from scheduler.services.worker.processes import become_subreaper, exit_now, kill_tree


ANNOUNCE_WAIT = 60.0
CLUSTER_EXIT_SECONDS = 10.0  # past the cluster's own stop bound: its last writes, then its tree is killed from here


def parse_addr(addr: str) -> tuple[str, int]:
    """'127.0.0.1:8000', '[::1]:8000', '0.0.0.0:80' or ':8000' -> (host, port); a clear error otherwise."""
    host, sep, port_text = addr.rpartition(":")
    if not sep or not port_text.isdigit():
        raise CommandError(f"--addr: expected HOST:PORT such as 127.0.0.1:8000, got {addr!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise CommandError(f"--addr: port must be 1-65535, got {port}")
    host = host.strip("[]") or "127.0.0.1"
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise CommandError(f"--addr: {host!r} is not an IP address (or localhost)") from None
    return host, port


def logins_box(text: str, *, path: str, url: str, width: int = 76) -> str:
    """The demo logins framed so that they stand out of the cluster's log lines, with where they are kept.

    A line "login: operator / PASSWORD   (what it may do; ...)" shows its login and password on a line of its own
    and what it may do wrapped below, so the box fits a terminal.
    """
    lines = ["Demo logins (setup_demo shows a password once; save it now):", ""]
    for line in text.splitlines():
        head, _, rest = line.strip().partition("   (")
        if not head:
            continue
        lines.append(head)
        lines.extend(textwrap.wrap(rest.rstrip(")"), width=width - 4, initial_indent="    ",
                                   subsequent_indent="    "))
    lines += ["", f"Open {url} and log in. These lines are kept", "(readable only by you) in", f"  {path}",
              "Delete that file once you have saved them."]
    inner = max(len(line) for line in lines)
    return "\n".join(["+" + "=" * (inner + 2) + "+", *[f"| {line:<{inner}} |" for line in lines],
                      "+" + "=" * (inner + 2) + "+"])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except Exception:  # not up yet: refused, reset, a 5xx while it starts
        return False


def _loops_started() -> bool:
    try:
        return LoopLease.objects.exclude(holder="").exists()
    except Exception:  # the database is busy or away: ask again on the next turn
        return False


WORKER_CLASSES = ("gevent", "gthread")


def _worker_options() -> list[str]:
    """gevent (default): a greenlet per connection, so slow clients hold no thread; gthread: a thread pool."""
    worker = settings.ETL_WEB_WORKER_CLASS
    if worker not in WORKER_CLASSES:
        raise CommandError(f"ETL_WEB_WORKER_CLASS: must be one of {', '.join(WORKER_CLASSES)}, got {worker!r}")
    # gunicorn's own workers, whose refusals of an /api/v1/ request (414, 431, 400) are problem+json
    if worker == "gevent":
        return ["--worker-class", "etlsite.gunicorn_workers.GeventWorker",
                "--worker-connections", str(settings.ETL_WEB_WORKER_CONNECTIONS)]
    return ["--worker-class", "etlsite.gunicorn_workers.ThreadWorker", "--threads", str(settings.ETL_WEB_THREADS)]


def _refuse_a_second_server(host: str, port: int) -> None:
    """A second `serve` (a second `make run`) on a taken address is refused before it starts anything (its cluster
    would otherwise run beside the first one's while its web server failed to bind)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise CommandError(
                f"--addr: {host}:{port} is in use ({exc.strerror}): another `serve` (`make run`) may be running; "
                "stop it first (Ctrl-C in its terminal), or pass another --addr / ETL_ADDR") from None


class Command(BaseCommand):
    help = "Run the web server (gunicorn, static files by WhiteNoise) and a qcluster; Ctrl-C or SIGTERM stops both."

    def add_arguments(self, parser):
        parser.add_argument(
            "--addr", default=settings.ETL_ADDR, help="HOST:PORT to listen on (default: ETL_ADDR or 127.0.0.1:8000)."
        )
        parser.add_argument(
            "--grace", type=float, default=30.0,
            help="On Ctrl-C or SIGTERM: seconds the web's requests and the cluster's running runs get to end before "
                 "they are stopped (the runs go back to the queue).")
        parser.add_argument(
            "--no-cluster", action="store_true",
            help="Web only: for a machine whose clusters run elsewhere (and the browser tests, which drive runs).",
        )

    def handle(self, *args, **opts):
        host, port = parse_addr(opts["addr"])
        if opts["grace"] <= 0:
            raise CommandError(f"--grace: must be a positive number of seconds, got {opts['grace']}")
        _refuse_a_second_server(host, port)
        call_command("collectstatic", interactive=False, verbosity=0)
        bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        manage = [sys.executable, sys.argv[0]] if sys.argv[0].endswith("manage.py") else [sys.executable, "manage.py"]
        procs = {
            "web": subprocess.Popen([
                sys.executable, "-m", "gunicorn", "etlsite.wsgi",
                "--chdir", str(settings.BASE_DIR),
                "--bind", bind,
                "--workers", str(settings.ETL_WEB_WORKERS),
                *_worker_options(),
                "--timeout", str(settings.ETL_WEB_TIMEOUT),
                "--keep-alive", str(settings.ETL_WEB_KEEPALIVE),
                # bounded request heads: a client cannot make a worker buffer an endless header
                "--limit-request-line", "8190", "--limit-request-fields", "100",
                "--limit-request-field_size", "8190",
                "--graceful-timeout", str(int(opts["grace"])),
                # one shared default socket path would make two servers on a machine fight over it
                "--no-control-socket",
            ]),
        }
        if not opts["no_cluster"]:
            procs["cluster"] = subprocess.Popen([*manage, "qcluster", "--grace", str(opts["grace"])])
        what = "cluster not started (--no-cluster)" if opts["no_cluster"] else "cluster started"
        self.stdout.write(self.style.SUCCESS(f"web on http://{bind}/  ·  {what}  ·  Ctrl-C stops both"))
        self.stdout.flush()
        stopping = {"at": None}

        def stop(signum, frame):
            if stopping["at"] is None:
                stopping["at"] = time.monotonic()
                for proc in procs.values():
                    if proc.poll() is None:
                        proc.send_signal(signal.SIGTERM)

        url = f"http://{bind}/"
        # the logins come last, once the web answers and the cluster's loops hold their leases (its start-up lines
        # are out), and then at the latest after ANNOUNCE_WAIT seconds
        announce = {"due": time.monotonic() + ANNOUNCE_WAIT, "next": 0.0, "done": not Path(
            settings.ETL_DEMO_LOGINS_FILE).is_file()}

        def announce_logins() -> None:
            now = time.monotonic()
            if announce["done"] or now < announce["next"]:
                return
            announce["next"] = now + 1
            ready = _answers(url + "accounts/login/") and (opts["no_cluster"] or _loops_started())
            if not ready and now < announce["due"]:
                return
            announce["done"] = True
            try:
                text = Path(settings.ETL_DEMO_LOGINS_FILE).read_text()
            except OSError:
                return
            time.sleep(0.5)  # the cluster's last start-up line is written just after its lease
            self.stdout.write("\n" + logins_box(text, path=settings.ETL_DEMO_LOGINS_FILE, url=url) + "\n")
            self.stdout.flush()

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        # a child's orphan (a command's process whose cluster died) comes here rather than to init, and is ended below
        become_subreaper()
        bounds = {"web": opts["grace"] + 5,
                  "cluster": shutdown_bound(grace=opts["grace"], cancel_grace=settings.ETL_CANCEL_GRACE_SECONDS)
                  + CLUSTER_EXIT_SECONDS}
        code = 0
        while any(p.poll() is None for p in procs.values()):
            for name, proc in procs.items():
                if proc.poll() is not None and stopping["at"] is None:
                    self.stderr.write(f"{name} exited with {proc.returncode}; stopping the rest")
                    code = proc.returncode or 1
                    stop(signal.SIGTERM, None)
            if stopping["at"] is None:
                announce_logins()
            if stopping["at"] is not None:
                for name, proc in procs.items():
                    if proc.poll() is None and time.monotonic() - stopping["at"] > bounds[name]:
                        self.stderr.write(f"{name} did not stop within {bounds[name]:g} s; killing its processes")
                        kill_tree(proc.pid)  # the whole tree: a cluster's sentinel, workers, commands
                        proc.wait(5)
            time.sleep(0.2)
        left = kill_tree(os.getpid(), root_too=False)
        if left:
            self.stderr.write(f"killed {len(left)} process(es) left behind by the web server or the cluster")
        self.stdout.write("stopped")
        exit_now(code)
