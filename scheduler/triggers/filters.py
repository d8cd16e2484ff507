"""Event filters in CEL (Common Expression Language), evaluated in a sandbox.

User text is parsed by celpy, never by Python's eval: a filter can read the
payload's fields and call CEL's own functions, nothing else. A filter that
does not parse is refused when the schedule is saved, with the parser's
position and the text near it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from scheduler.core import ConfigError

MAX_FILTER_LENGTH = 2000
FIELD = "trigger_config.filter"


def _parse_problem(expression: str, exc: Exception) -> str:
    line = getattr(exc, "line", None)
    column = getattr(exc, "column", None)
    if not isinstance(line, int) or not isinstance(column, int):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"does not parse: {first}"
    text = expression.splitlines()[line - 1] if 0 < line <= len(expression.splitlines()) else expression
    near = text[column - 1:column + 19].strip()
    where = f"near '{near}'" if near else "at the end (is something missing?)"
    return (f"does not parse at line {line}, column {column} {where}; "
            "write a CEL expression such as status == 'confirmed' && amount > 100")


@lru_cache(maxsize=512)
def compile_filter(expression: str):
    """The compiled program for a filter, or ConfigError naming trigger_config.filter."""
    import celpy

    if not isinstance(expression, str):
        raise ConfigError(FIELD, "must be a string expression such as status == 'confirmed'")
    if len(expression) > MAX_FILTER_LENGTH:
        raise ConfigError(FIELD, f"is longer than {MAX_FILTER_LENGTH} characters")
    if "\x00" in expression:
        raise ConfigError(FIELD, "contains a NUL character")
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
        return env.program(ast)
    except celpy.CELParseError as exc:
        raise ConfigError(FIELD, _parse_problem(expression, exc)) from None
    except RecursionError:
        raise ConfigError(FIELD, "is nested too deeply") from None
    except Exception as exc:  # noqa: BLE001  celpy's lark front end raises other parse errors too
        raise ConfigError(FIELD, _parse_problem(expression, exc)) from None


def matches(expression: str, payload: dict[str, Any]) -> bool:
    """True when the filter holds for the payload; an empty filter matches all.

    Only a boolean true matches. Evaluation errors (a missing key, a type
    mismatch such as int > double) and non-boolean results mean "no match":
    an event that cannot be judged must not start a pipeline.
    """
    if not expression:
        return True
    import celpy
    from celpy import celtypes

    program = compile_filter(expression)
    try:
        activation = {k: celpy.json_to_cel(v) for k, v in payload.items() if isinstance(k, str)}
        result = program.evaluate(activation)
    except Exception:  # noqa: BLE001  a filter error of any kind means "no match"
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)
