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


def _refuse_constant(field: str):
    def refuse(name: str) -> Any:
        raise ConfigError(field, f"{name} is not a number JSON allows")

    return refuse


def parse_json(text: str | bytes, *, field: str) -> Any:
    """json.loads with bounded numbers (and no NaN / Infinity).

    Raises ConfigError naming `field` for an oversized or non-finite number,
    and json.JSONDecodeError (a ValueError) for text that is not JSON.
    """

    def as_int(literal: str) -> int:
        return int(check_number_literal(literal, field=field))

    def as_float(literal: str) -> float:
        value = float(check_number_literal(literal, field=field))
        if not math.isfinite(value):
            raise ConfigError(field, f"the number {literal} is out of range")
        return value

    return json.loads(text, parse_int=as_int, parse_float=as_float, parse_constant=_refuse_constant(field))


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """At most `limit` characters of `value` ("…" marks a cut), non-printable and non-ASCII characters escaped.

    For messages about text read from a file: enough to recognise it, not
    enough to read a secret out of it, and nothing a terminal would act on.
    """
    text = str(value)
    cut = text[:limit]
    shown = "".join(c if c.isascii() and c.isprintable() else ascii(c)[1:-1] for c in cut)
    return f"{shown}…" if len(text) > limit else shown
