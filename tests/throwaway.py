"""Throwaway PostgreSQL and Redis servers for tests that restart or flush them.

A test never restarts, stops or flushes the machine's own services: whatever
else uses them (another test run, a developer's data) would be hurt. Tests
that need to do that start their own server here, in a temporary directory on
a free port, and do it to that one.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


class Unavailable(RuntimeError):
    """The binaries or the user needed to start a throwaway server are missing (the test skips)."""


# Ports a test process hands to the servers it starts. Under pytest-xdist each worker has a block of its own (and the
# PostgreSQL pass other blocks than the SQLite pass, as `make test` runs them side by side), below the kernel's
# ephemeral range (32768+), so neither another worker nor an outgoing connection takes the port between our probe
# and the server's bind. A run without xdist asks the kernel, as before.
PORT_BLOCK, PORT_BLOCKS_FROM = 400, 20000
_next_port: list[int] = []


def _port_block() -> range | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not worker[2:].isdigit():
        return None
    slot = int(worker[2:]) % 14 + (14 if os.environ.get("DATABASE_URL", "").startswith("postgres") else 0)
    start = PORT_BLOCKS_FROM + slot * PORT_BLOCK
    return range(start, start + PORT_BLOCK)


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    block = _port_block()
    if block is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    if not _next_port:
        _next_port.append(block.start + os.getpid() % PORT_BLOCK)  # a restarted worker starts elsewhere
    for _ in range(PORT_BLOCK):  # each call moves on, so a port handed out but not bound yet is not handed out again
        port = block.start + (_next_port[0] - block.start) % PORT_BLOCK
        _next_port[0] = port + 1
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1}")


def _wait(predicate, *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")


def _pg_bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise Unavailable("PostgreSQL's initdb is not installed (looked in /usr/lib/postgresql/*/bin and PATH)")


class ThrowawayPostgres:
    """`initdb` into a temporary directory and a postmaster on a free port, trust auth, fsync off.

    PostgreSQL refuses to run as root, so as root the server runs as the `postgres` user.
    """

    def __init__(self) -> None:
        self.bindir = _pg_bindir()
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run PostgreSQL as") from None
            self.user = "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="etl-pg-"))
        if self.user:
            shutil.chown(self.dir, user=self.user)
        self.data, self.log = self.dir / "data", self.dir / "server.log"
        self.port = 0

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.dir)
        if result.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}): {result.stderr}{result.stdout}\n{tail}"
            )
        return result

    def start(self) -> ThrowawayPostgres:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")
        for attempt in range(3):  # another process may take the free port between our probe and the bind
            self.port = free_port()
            opts = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off -c max_connections=100"
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", "60", "start")
                return self
            except RuntimeError:
                if attempt == 2:
                    raise
        return self

    def restart(self) -> None:
        """A fast shutdown (every session is terminated, as a package upgrade does) and a start."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", "fast", "-w", "-t", "60", "restart")

    def stop(self) -> None:
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class ThrowawayRedis:
    """A redis-server on a free port, no persistence, stopped (and restarted) only by the test."""

    def __init__(self) -> None:
        self.binary = shutil.which("redis-server")
        if not self.binary:
            raise Unavailable("redis-server is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="etl-redis-"))
        self.log = self.dir / "server.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> ThrowawayRedis:
        log = open(self.log, "ab")  # noqa: SIM115  closed with the process
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: self._ping() or self.proc.poll() is not None, timeout=30, what="redis-server to answer")
        if self.proc.poll() is not None:
            raise RuntimeError(f"redis-server exited:\n{self.log.read_text()[-2000:]}")
        return self

    def restart(self) -> None:
        """Stop it as `SHUTDOWN NOSAVE` would (everything queued is gone) and start it again on the same port."""
        self._terminate()
        self.start()

    def _terminate(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()  # with --save "" redis exits at once, keeping nothing
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def stop(self) -> None:
        self._terminate()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def default_database(url: str):
    """Point Django's `default` connection at another database for the duration, migrated.

    The test's own database (SQLite or PostgreSQL) is left as it was and is the
    `default` again afterwards, so pytest-django's teardown flushes the right one.
    """
    import dj_database_url
    from django.core.management import call_command
    from django.db import connections
    from django.db.utils import load_backend

    original = connections["default"]
    config = connections.configure_settings({"default": dj_database_url.parse(url)})["default"]
    wrapper = load_backend(config["ENGINE"]).DatabaseWrapper(config, "default")
    connections["default"] = wrapper
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield wrapper
    finally:
        wrapper.close()
        connections["default"] = original
