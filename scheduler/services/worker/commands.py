"""Command targets: a schedule whose run executes an argv, without a shell, in its own process group.

The command is the schedule's (`Schedule.command`: argv, cwd, env, or an
explicit `shell` string), set by its author in the admin, the schedules file
or the Python API; never by run params. It starts with a clean environment
(`run_env`: PATH, HOME, locale, TZ, ETL_COMMAND_ENV_PASSTHROUGH, its env, its
connections), never the worker's with the server's secrets. A run's facts
reach it in `ETL_*` variables (params only as JSON in ETL_PARAMS). Its stdout and stderr go into
the run log line by line as they are written, under the run log's cap. Exit 0
is success; the command may report rows and a new watermark in the JSON file
named by ETL_RESULT_FILE. The process and its descendants are started,
signalled and reaped by services/supervisor.py: none outlives the run.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import re
import tempfile
import threading
from collections import deque
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.utils import timezone

from scheduler.core import Window
from scheduler.services.worker import supervisor
from scheduler.services.common.errors import ServiceError
from scheduler.services.runs.watermarks import decode_value
from scheduler.core.masking import MASK
from scheduler.services.common.crypto import decrypt, encrypt
from scheduler.services.common.masking import mask_register

log = logging.getLogger(__name__)
TAIL_LINES = 20
MAX_ARGS = 256
MAX_ARG_CHARS = 32 * 1024
MAX_RESULT_BYTES = 64 * 1024
ENV_NAME_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
KEYS = ("argv", "shell", "cwd", "env", "connections")
SECRET, SEALED = "secret", "encrypted"  # an env value marked secret: as given / as stored (a Fernet token)
CONNECTION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class CommandFailed(Exception):
    """A command ended with a non-zero exit status (or wrote a bad result file)."""

    def __init__(self, message: str, *, exit_code: int | None, tail: str = "") -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.tail = tail


@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    rows: int | None = None
    watermark: Any = None  # what the result file reported, as written (decoded against the mark by the caller)


# --- the definition ---------------------------------------------------------------

def command_spec_check(value: Any, *, field: str = "command") -> dict:
    """A schedule's command, checked: {"argv": [...]} or {"shell": "..."}, with optional "cwd", "env" (a value
    may be {"secret": "..."}) and "connections" (names of connections whose ETL_CONN_<NAME>_* it gets)."""
    if not isinstance(value, dict):
        raise ServiceError('must be an object such as {"argv": ["dbt", "build"]}', field=field)
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise ServiceError(f"unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(KEYS)})", field=field)
    argv, shell = value.get("argv"), value.get("shell")
    if (argv is None) == (shell is None):
        raise ServiceError('needs exactly one of "argv" (a list, run without a shell) or "shell" (a string for '
                           '/bin/sh -c, an explicit opt-in)', field=field)
    out: dict[str, Any] = {}
    if argv is not None:
        if not isinstance(argv, list) or not argv:
            raise ServiceError("must be a non-empty list of strings", field=f"{field}.argv")
        if len(argv) > MAX_ARGS:
            raise ServiceError(f"has more than {MAX_ARGS} arguments", field=f"{field}.argv")
        for i, arg in enumerate(argv):
            if not isinstance(arg, str) or "\x00" in arg or len(arg) > MAX_ARG_CHARS:
                raise ServiceError(f"item {i} must be a string without NUL, at most {MAX_ARG_CHARS} characters",
                                   field=f"{field}.argv")
        if not argv[0].strip():
            raise ServiceError("the program (item 0) must not be empty", field=f"{field}.argv")
        out["argv"] = list(argv)
    else:
        if not isinstance(shell, str) or not shell.strip() or "\x00" in shell or len(shell) > MAX_ARG_CHARS:
            raise ServiceError(f"must be a non-empty string without NUL, at most {MAX_ARG_CHARS} characters",
                               field=f"{field}.shell")
        out["shell"] = shell
    cwd = value.get("cwd")
    if cwd not in (None, ""):
        if not isinstance(cwd, str) or "\x00" in cwd or not os.path.isabs(cwd):
            raise ServiceError("must be an absolute path", field=f"{field}.cwd")
        out["cwd"] = cwd
    env = value.get("env")
    if env not in (None, {}):
        if not isinstance(env, dict):
            raise ServiceError("must be an object of NAME: value strings", field=f"{field}.env")
        for name, val in env.items():
            if not isinstance(name, str) or not name or set(name) - ENV_NAME_CHARS or name[0].isdigit():
                raise ServiceError(f"{name!r} is not a variable name (letters, digits, _)", field=f"{field}.env")
            if name.startswith("ETL_"):
                raise ServiceError(
                    f"{name}: ETL_* variables are the scheduler's (the run's facts)", field=f"{field}.env"
                )
            if isinstance(val, dict) and len(val) == 1 and set(val) <= {SECRET, SEALED}:
                val = next(iter(val.values()))  # a value marked secret, as given or as stored (sealed)
            if not isinstance(val, str) or "\x00" in val:
                raise ServiceError(f'{name}: the value must be a string without NUL, or {{"secret": "..."}} for '
                                   "one that is masked everywhere and encrypted at rest", field=f"{field}.env")
        out["env"] = dict(env)
    connections = value.get("connections")
    if connections not in (None, []):
        out["connections"] = connection_names_check(connections, field=f"{field}.connections")
    return out


def connection_names_check(value: Any, *, field: str) -> list[str]:
    """A target's declared connections: a list of connection names, each once."""
    if not isinstance(value, list) or not all(isinstance(name, str) and CONNECTION_NAME.match(name) for name in value):
        raise ServiceError("must be a list of connection names such as [\"warehouse\"] (lower-case letters, digits, "
                           "_)", field=field)
    if len(set(value)) != len(value):
        raise ServiceError("names a connection twice", field=field)
    return list(value)


# --- env values marked secret --------------------------------------------------------

def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and set(value) <= {SECRET, SEALED}


def command_env_seal(new: Any, old: Any) -> Any:
    """A command as given at a door, each env value marked secret made ready to store.

    `{"secret": "value"}` is stored encrypted (`{"encrypted": token}`); `{"secret": "***"}`, the masked form
    pages, the API and the schedules file show, keeps what is stored under that name. A sealed value given
    at a door is refused unless it is the one stored there: a token copied from elsewhere would open
    another schedule's secret. Anything else passes as given, for command_spec_check to judge.
    """
    if not isinstance(new, dict) or not isinstance(new.get("env"), dict):
        return new
    stored = old.get("env") if isinstance(old, dict) and isinstance(old.get("env"), dict) else {}
    env: dict[str, Any] = {}
    for name, value in new["env"].items():
        if isinstance(value, dict) and set(value) == {SECRET} and isinstance(value[SECRET], str):
            if value[SECRET] == MASK:
                kept = stored.get(name)
                if not (isinstance(kept, dict) and set(kept) == {SEALED}):
                    raise ServiceError(f'{name}: no stored secret to keep; give its value as {{"secret": "..."}}',
                                       field="command.env")
                env[name] = kept
            else:
                if "\x00" in value[SECRET]:
                    raise ServiceError(f"{name}: the value must be a string without NUL", field="command.env")
                mask_register(value[SECRET])
                env[name] = {SEALED: encrypt(value[SECRET])}
        elif isinstance(value, dict) and SEALED in value and stored.get(name) != value:
            raise ServiceError(f'{name}: give a secret value as {{"secret": "..."}}', field="command.env")
        else:
            env[name] = value
    return {**new, "env": env}


def command_env_resolve(given: Any, stored: Any) -> Any:
    """`given` (a command from a file) with each secret env value that equals the stored one replaced by the
    stored (sealed) form, so comparing the two finds a change only where the file changes a value."""
    if not isinstance(given, dict) or not isinstance(given.get("env"), dict):
        return given
    old = stored.get("env") if isinstance(stored, dict) and isinstance(stored.get("env"), dict) else {}
    env = dict(given["env"])
    for name, value in env.items():
        kept = old.get(name)
        if isinstance(value, dict) and set(value) == {SECRET} and isinstance(kept, dict) and set(kept) == {SEALED}:
            if value[SECRET] == MASK or value[SECRET] == decrypt(kept[SEALED]):
                env[name] = kept
    return {**given, "env": env}


def command_spec_shown(spec: Any) -> Any:
    """A command as people and clients see it (API, pages, admin, audit, export): secret env values masked."""
    if not isinstance(spec, dict) or not isinstance(spec.get("env"), dict):
        return spec
    return {**spec, "env": {name: {SECRET: MASK} if _is_secret(value) else value
                            for name, value in spec["env"].items()}}


def command_env_open(spec: dict) -> dict[str, str]:
    """The env of a checked command as the process gets it: secret values decrypted, and registered with the
    masker first, so whatever the command prints of them is masked in its log."""
    env: dict[str, str] = {}
    for name, value in (spec.get("env") or {}).items():
        if _is_secret(value):
            value = decrypt(value[SEALED]) if SEALED in value else value[SECRET]
            mask_register(value)
        env[name] = value
    return env


def command_argv(spec: dict) -> list[str]:
    """What is executed: the argv as written, or /bin/sh -c with the shell string (the explicit opt-in)."""
    return list(spec["argv"]) if "argv" in spec else ["/bin/sh", "-c", spec["shell"]]


def command_path(path: str | None = None) -> str:
    """The PATH a command is looked up in: the worker's, then the scheduler's own environment's scripts (so a
    console script of a package installed beside the scheduler runs by its name, even when that environment
    is not activated); a program of the same name earlier on PATH still wins."""
    path = os.environ.get("PATH", os.defpath) if path is None else path
    beside = os.path.dirname(sys.executable)
    return path if beside in path.split(os.pathsep) else os.pathsep.join(p for p in (path, beside) if p)


#: what a command inherits from the worker's environment, besides every LC_* and ETL_COMMAND_ENV_PASSTHROUGH
BASE_ENV = ("PATH", "HOME", "LANG", "TZ")


def base_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The part of the worker's environment a command starts with: PATH, HOME, locale, TZ and the passthrough.

    Never the whole environment: the worker's holds the server's secrets (SECRET_KEY, DATABASE_URL, tokens,
    connection URLs), and a command's output is shown to every viewer of its run.
    """
    environ = os.environ if environ is None else environ
    refused = set(settings.ETL_SERVER_SECRET_NAMES)
    wanted = [*BASE_ENV, *(name for name in environ if name.startswith("LC_")),
              *(name for name in settings.ETL_COMMAND_ENV_PASSTHROUGH
                if name not in refused and not name.startswith("ETL_CONN_"))]  # settings refuse these; so do we
    return {name: environ[name] for name in wanted if name in environ}


def run_env(*, run_id: int, schedule: str, logical_time: datetime | None, window_low: str, window_high: str,
            params: dict, attempt: int, backfill: int | None, result_file: str, extra: dict[str, str],
            connections: dict[str, str] | None = None) -> dict[str, str]:
    """A command's whole environment: `base_env`, the schedule's `env` (`extra`), its declared connections'
    ETL_CONN_* variables, then the run's facts (which nothing overrides)."""
    env = {**base_env(), **extra, **(connections or {})}
    env["PATH"] = command_path(env.get("PATH"))
    env.update({
        "ETL_RUN_ID": str(run_id),
        "ETL_SCHEDULE": schedule,
        "ETL_LOGICAL_TIME": logical_time.isoformat() if logical_time else "",
        "ETL_WINDOW_LOW": window_low,
        "ETL_WINDOW_HIGH": window_high,
        "ETL_PARAMS": json.dumps(params, sort_keys=True, default=str),
        "ETL_ATTEMPT": str(attempt),
        "ETL_BACKFILL_ID": "" if backfill is None else str(backfill),
        "ETL_RESULT_FILE": result_file,
    })
    return env


# --- running it ---------------------------------------------------------------------

def command_execute(*, spec: dict, env: dict[str, str], control: supervisor.RunControl, logs,
                    result_file: str) -> CommandResult:
    """Run the command to its end under `control`; its output into `logs` as it comes.

    A run asked to stop (the command was signalled) returns just the exit
    code, whatever it is: the caller sees the request on `control` and writes
    the stop's outcome with that code (its own exit after SIGTERM, or -9).
    Raises CommandFailed for a non-zero exit or a bad result file.
    """
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    argv = command_argv(spec)
    logs.note(f"command: {' '.join(argv)}" + (f" (in {spec['cwd']})" if spec.get("cwd") else ""))
    try:
        proc = supervisor.spawn(argv, cwd=spec.get("cwd"), env=env, control=control)
    except OSError as exc:
        raise CommandFailed(f"command could not start: {exc.strerror or exc} ({argv[0]})", exit_code=None) from exc
    readers = [
        threading.Thread(target=_pump_lines, args=(proc.stdout, "stdout", logs, tail), daemon=True,
                         name=f"etl-run-{control.run_id}-stdout"),
        threading.Thread(target=_pump_lines, args=(proc.stderr, "stderr", logs, tail), daemon=True,
                         name=f"etl-run-{control.run_id}-stderr"),
    ]
    for reader in readers:
        reader.start()
    try:
        code = proc.wait()
    finally:
        # the leader ended (or we are unwinding): nothing of its group or its orphans may outlive the run
        left = supervisor.reap_group(control)
        for reader in readers:
            reader.join(timeout=5)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if left:
        logs.note(f"processes {', '.join(map(str, left))} of the command could not be ended", level="ERROR",
                  force=True)
    if control.requested is not None:  # it was asked to stop: its exit is the stop, not an error of its own
        logs.note(f"command exited with {_exit_text(code)} after it was asked to stop")
    else:
        logs.note(f"command exited with {_exit_text(code)}", level="INFO" if code == 0 else "ERROR")
    if control.requested is not None:
        return CommandResult(exit_code=code)  # no result file counts after the request
    text = "\n".join(tail)
    if code != 0:
        raise CommandFailed(f"command exited with {_exit_text(code)}", exit_code=code, tail=text)
    rows, watermark = _read_result(result_file, tail=text)
    return CommandResult(exit_code=code, rows=rows, watermark=watermark)


def command_tempdir(run_id: int) -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix=f"etl-run-{run_id}-")


def _exit_text(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit code {code}"


def _pump_lines(pipe: IO[bytes] | None, source: str, logs, tail: deque) -> None:
    """One stream of the command into the run log, a line at a time, each line bounded (so memory is)."""
    if pipe is None:
        return
    limit = settings.ETL_RUN_LOG_MAX_LINE
    try:
        while True:
            raw = pipe.readline(limit + 1)
            if not raw:
                return
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            tail.append(text)
            logs.add(text, level="INFO", source=source, at=timezone.now())
    except (OSError, ValueError):
        return  # the pipe was closed under us: the command is gone


def _read_result(path: str, *, tail: str) -> tuple[int | None, Any]:
    """(rows, watermark) from the result file, if the command wrote one."""
    file = Path(path)
    if not file.exists():
        return None, None
    try:
        if file.stat().st_size > MAX_RESULT_BYTES:
            raise ValueError(f"larger than {MAX_RESULT_BYTES} bytes")
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CommandFailed(f"ETL_RESULT_FILE: not a JSON object ({exc})", exit_code=0, tail=tail) from None
    if not isinstance(data, dict):
        raise CommandFailed('ETL_RESULT_FILE: must be a JSON object such as {"rows": 120}', exit_code=0, tail=tail)
    rows = data.get("rows")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise CommandFailed(f"ETL_RESULT_FILE: rows must be a whole number >= 0, got {rows!r}", exit_code=0, tail=tail)
    watermark = data.get("watermark")
    if watermark is not None and (isinstance(watermark, bool) or not isinstance(watermark, (str, int))):
        raise CommandFailed(f"ETL_RESULT_FILE: watermark must be an ISO datetime or an integer, got {watermark!r}",
                            exit_code=0, tail=tail)
    return rows, watermark


def command_mark(config, window: Window | None, reported: Any) -> tuple[Window | None, Any]:
    """The watermark a command reported in its result file, read against the schedule's mark.

    Integer marks move to the reported value (the largest loaded). Datetime
    marks move to the window's high end, or to the reported time when the
    command loaded less than its window.
    """
    if reported is None:
        return window, None
    try:
        value = decode_value(config, str(reported))
    except (TypeError, ValueError):
        kind = "an ISO datetime" if config.is_datetime else "an integer"
        raise CommandFailed(f"ETL_RESULT_FILE: watermark must be {kind}, got {reported!r}", exit_code=0) from None
    if config.is_datetime:
        if window is not None and window.low <= value < window.high:
            return Window(window.low, value), None
        return window, None
    return window, value


__all__ = ["CommandFailed", "CommandResult", "base_env", "command_argv", "command_env_open", "command_env_resolve",
           "command_env_seal", "command_execute", "command_mark", "command_path", "command_spec_check",
           "command_spec_shown", "connection_names_check", "run_env"]
