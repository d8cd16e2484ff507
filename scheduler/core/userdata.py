"""Data from users, parsed with bounds: numbers of sane size, and short, escaped excerpts in messages.

Python turns a JSON or YAML integer literal into an int by converting
its text; past 4,300 digits that raises a ValueError nobody expects (a 500),
and below it a 4,000-digit number is still no real parameter. Every door that
parses JSON or YAML from a user goes through `parse_json` or
`check_number_literal`, so an oversized number is refused with a message that
names the field.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .errors import ConfigError

#: The longest number literal (digits, sign, point, exponent) taken from a user.
MAX_NUMBER_CHARS = 100
#: How much of a value read from a file a message may quote.
EXCERPT_CHARS = 10


def check_number_literal(text: str, *, field: str) -> str:
    """`text` (a number as written) when it is short enough, else ConfigError naming `field`."""
    if len(text) > MAX_NUMBER_CHARS:
        raise ConfigError(field, f"a number has {len(text)} digits; at most {MAX_NUMBER_CHARS} are allowed")
    return text


class _Refused:
    """Stands in for a number literal that was refused, so the walk after parsing can name where it was."""

    def __init__(self, problem: str) -> None:
        self.problem = problem


def _path(parent: str, key: Any) -> str:
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


def _first_refused(value: Any, field: str) -> tuple[str, str] | None:
    """(where, problem) of the first refused literal in parsed JSON, walked iteratively (any depth)."""
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, _Refused):
            return where, item.problem
        if isinstance(item, dict):
            stack.extend((v, _path(where, k)) for k, v in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((v, _path(where, i)) for i, v in reversed(list(enumerate(item))))
    return None


# NUL (PostgreSQL's text cannot hold it) and the surrogates: a lone one ("\\ud800" in JSON, or undecodable bytes in
# a command's arguments) is no character, cannot be encoded as UTF-8, and breaks every later reader of the row
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
SURROGATE_PROBLEM = "must be valid Unicode text: it holds a lone surrogate ({code}), which is no character"


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored as text (NUL, a lone surrogate), or None when it can."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain the NUL character"
    return SURROGATE_PROBLEM.format(code=f"\\u{ord(found.group()):04x}")


def storable(text: str) -> bool:
    """Whether `text` can be stored and shown as text (no NUL, no lone surrogate)."""
    return _UNSTORABLE.search(text) is None


def _first_surrogate(value: Any, field: str) -> tuple[str, str] | None:
    """(where, problem) of the first key or string holding a lone surrogate, walked iteratively (any depth)."""
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = _UNSTORABLE.search(item)
            if found is not None and found.group() != "\x00":
                return where, text_problem(found.group()) or ""
        elif isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                if isinstance(key, str) and not storable(key.replace("\x00", "")):
                    return where, "a key " + (text_problem(key.replace("\x00", "")) or "")
                stack.append((child, _path(where, key)))
        elif isinstance(item, list):
            stack.extend((v, _path(where, i)) for i, v in reversed(list(enumerate(item))))
    return None


def _may_hold_surrogates(text: str | bytes) -> bool:
    # a surrogate comes from a \u escape, a raw one in a str, or its UTF-8 form in bytes (json.loads passes it)
    if isinstance(text, bytes):
        return b"\\u" in text or b"\\U" in text or b"\xed" in text
    return "\\u" in text or "\\U" in text or any("\ud800" <= c <= "\udfff" for c in text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def shown_text(value: Any) -> Any:
    """`value` (text, or JSON-like data) with every lone surrogate written as the text `\\ud800`: one stored
    before they were refused (SQLite kept it, escaped, in a JSON column) must not stop a page or an export that
    shows it, since it cannot be encoded as UTF-8. Everything else is returned as it is."""
    if isinstance(value, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value) if _SURROGATE.search(value) else value
    if isinstance(value, dict):
        return {shown_text(k): shown_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_text(v) for v in value]
    return value


def check_surrogates(value: Any, *, field: str) -> Any:
    """`value` (parsed JSON, or data built in Python) when no string or key in it holds a lone surrogate; else
    ConfigError naming where."""
    found = _first_surrogate(value, field)
    if found is not None:
        raise ConfigError(*found)
    return value


def parse_json(text: str | bytes, *, field: str) -> Any:
    """json.loads with bounded numbers (and no NaN / Infinity), and text that is text.

    Raises ConfigError naming where the number was (`params.rows`) for an
    oversized or non-finite number, or the string for a lone surrogate
    (`"\\ud800"`), and json.JSONDecodeError (a ValueError) for text that is
    not JSON.
    """
    refused: list[_Refused] = []

    def refuse(problem: str) -> _Refused:
        refused.append(_Refused(problem))
        return refused[-1]

    def as_int(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            return refuse(f"a number has {len(literal)} digits; at most {MAX_NUMBER_CHARS} are allowed")
        return int(literal)

    def as_float(literal: str) -> Any:
        if len(literal) > MAX_NUMBER_CHARS:
            return refuse(f"a number has {len(literal)} digits; at most {MAX_NUMBER_CHARS} are allowed")
        value = float(literal)
        return value if math.isfinite(value) else refuse(f"the number {literal} is out of range")

    def as_constant(name: str) -> Any:
        return refuse(f"{name} is not a number JSON allows")

    value = json.loads(text, parse_int=as_int, parse_float=as_float, parse_constant=as_constant)
    if refused:
        found = _first_refused(value, field)
        where, problem = found if found is not None else (field, refused[0].problem)  # a key is never a number
        raise ConfigError(where, problem)
    if _may_hold_surrogates(text):
        check_surrogates(value, field=field)
    return value


def check_numbers(value: Any, *, field: str) -> Any:
    """`value` (JSON-like data built in Python) when every number in it is of a size JSON input may have."""
    limit = 10 ** MAX_NUMBER_CHARS
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and not -limit < item < limit:
            raise ConfigError(where, f"a number has more than {MAX_NUMBER_CHARS} digits")
        if isinstance(item, float) and not math.isfinite(item):
            raise ConfigError(where, f"the number {item} is out of range")
        if isinstance(item, dict):
            stack.extend((v, _path(where, k)) for k, v in item.items())
        elif isinstance(item, (list, tuple)):
            stack.extend((v, _path(where, i)) for i, v in enumerate(item))
    return value


def check_depth(value: Any, *, field: str, limit: int, why: str = "") -> Any:
    """`value` when it nests at most `limit` levels of lists and objects; iterative, so any depth is measured."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, (list, tuple)) else None
        if children is None:
            continue
        if depth > limit:
            raise ConfigError(field, f"is nested more than {limit} levels deep" + (f", {why}" if why else ""))
        stack.extend((child, depth + 1) for child in children)
    return value


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `value` ("…" marks a cut), non-printable and non-ASCII characters escaped.

    For messages about text read from a file: enough to recognise it, not
    enough to read a secret out of it, and nothing a terminal would act on.
    """
    text = str(value)
    cut = text[:limit]
    shown = "".join(c if c.isascii() and c.isprintable() else ascii(c)[1:-1] for c in cut)
    return f"{shown}…" if len(text) > limit else shown


#: What opens a Jinja tag: dbt renders a var's string value as a template when it holds one (issue 33).
TEMPLATE_OPENERS = ("{{", "{%", "{#")


def check_no_templates(value: Any, *, field: str) -> Any:
    """`value` (JSON-like data) when no string in it, key or value at any depth, opens a Jinja tag.

    Run params are data: dbt renders a var's value as Jinja (`var()` compiles the string), so a param
    holding `{{`, `{%` or `{#` would run as code with the worker's rights. Raises ConfigError naming
    where (`params.region`, `params.rows[2]`), never quoting the value.
    """
    stack: list[tuple[Any, str]] = [(value, field)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str) and any(opener in item for opener in TEMPLATE_OPENERS):
            raise ConfigError(where, "holds a template opener ({{, {% or {#); run params are data, never "
                                     "templates, and dbt would render this one")
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and any(opener in key for opener in TEMPLATE_OPENERS):
                    raise ConfigError(where, "has a key holding a template opener ({{, {% or {#); run params "
                                             "are data, never templates")
                stack.append((child, _path(where, key)))
        elif isinstance(item, (list, tuple)):
            stack.extend((child, _path(where, i)) for i, child in enumerate(item))
    return value
# C0 controls but tab and newline, DEL and the C1 controls: ESC starts a terminal's escape sequences (colours,
# cursor moves, the window title, OSC 52 writes to the clipboard), CSI (U+009B) does in 8-bit terminals, and a lone
# carriage return lets a line overwrite what a reader sees before it.
_TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """`text` with every control character a terminal would act on shown escaped (ESC as `\\x1b`); tabs and
    newlines stay. For what a command printed, shown in the log as text and by `manage.py run_log`."""
    return _TERMINAL_CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
