"""Small helpers shared by the management commands: params, JSON output, errors."""
from __future__ import annotations

import json
import math
import sys
from datetime import date, datetime
from typing import Any

from django.core.management.base import CommandError

from scheduler.core import ConfigError
from scheduler.core.userdata import parse_json
from scheduler.models import Run

USAGE_ERROR = 2


def fail(message: str) -> CommandError:
    """Bad input: a clear message and exit code 2."""
    return CommandError(message, returncode=USAGE_ERROR)


def check_number(value: float | int, *, option: str, minimum: float = 0, allow_minimum: bool = True) -> None:
    """Refuse a numeric option out of range (negative, NaN, infinite) before the command changes anything."""
    ok = math.isfinite(value) and (value >= minimum if allow_minimum else value > minimum)
    if not ok:
        bound = f">= {minimum:g}" if allow_minimum else f"> {minimum:g}"
        raise fail(f"{option}: must be a finite number {bound}, got {value!r}")


def get_run(value: str, *, field: str = "run"):
    """The run a command names by id, with its schedule; exit 2 naming `field` when it is no run."""
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise fail(f"{field}: {value!r} is not a run id (a whole number)")
    run = Run.objects.select_related("schedule").filter(pk=int(text)).first()
    if run is None:
        raise fail(f"{field}: unknown run {int(text)}")
    return run


def parse_params(items: list[str] | None, *, field: str = "--param") -> dict[str, Any]:
    """k=v pairs; a value that parses as JSON (3, true, {"a":1}) keeps its type."""
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise fail(f"{field} {item!r}: expected KEY=VALUE")
        try:
            params[key] = parse_json(raw, field=key)
        except ConfigError as exc:  # JSON, but with an oversized number: not to be taken as text either
            raise fail(f"{field} {exc.field}: {exc.problem}") from None
        except ValueError:
            params[key] = raw
        except RecursionError:  # nested too deep for the parser: refuse, do not crash
            raise fail(f"{field} {key}: JSON nested too deeply") from None
    return params


def parse_json_object(text: str | None, *, field: str) -> dict[str, Any]:
    if text in (None, ""):
        return {}
    try:
        value = parse_json(text, field=field)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    except RecursionError:
        raise fail(f"{field}: JSON nested too deeply") from None
    except ValueError as exc:
        raise fail(f"{field}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise fail(f"{field}: must be a JSON object")
    return value


def _default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return str(value)


def dump_json(stdout, data: Any) -> None:
    stdout.write(json.dumps(data, indent=2, default=_default, sort_keys=True))


class ProgressLine:
    """A one-line progress bar for commands that wait (on a TTY it redraws in place)."""

    def __init__(self, stream=None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.last = ""

    def show(self, done: int, total: int, label: str = "") -> None:
        total = max(total, 1)
        filled = int(self.width * min(done, total) / total)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done}/{total} {label}".rstrip()
        if line == self.last:
            return
        self.last = line
        if self.tty:
            self.stream.write("\r" + line + " " * 10)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")
            self.stream.flush()


class StatusLine:
    """One line of progress for a wait with no known length: '| stopping 3.2 s...'.

    On a TTY the line is redrawn in place with a spinner; elsewhere (a log file,
    CI) a line is written only when the state changes, not on every poll.
    """

    FRAMES = "|/-\\"

    def __init__(self, stream=None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet  # --json: nothing but the JSON
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.turn = 0
        self.state = None
        self.width = 0

    def show(self, state: str, elapsed: float) -> None:
        if self.quiet:
            return
        text = f"{state} {elapsed:.1f} s..."
        if self.tty:
            frame = self.FRAMES[self.turn % len(self.FRAMES)]
            self.turn += 1
            line = f"{frame} {text}"
            self.stream.write("\r" + line.ljust(self.width))
            self.width = max(self.width, len(line))
        elif state != self.state:
            self.stream.write(text + "\n")
        else:
            return
        self.state = state
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
