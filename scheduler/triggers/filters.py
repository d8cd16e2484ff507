"""Event filters in CEL (Common Expression Language), evaluated in a sandbox.

User text is parsed by celpy, never by Python's eval. A filter that does not
parse is refused when the schedule is saved, with the parser's message.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from scheduler.core import ConfigError


@lru_cache(maxsize=512)
def compile_filter(expression: str):
    import celpy

    if len(expression) > 2000:
        raise ConfigError("trigger_config.filter", "is longer than 2000 characters")
    env = celpy.Environment()
    try:
        ast = env.compile(expression)
        return env.program(ast)
    except Exception as exc:  # celpy raises CELParseError and friends
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError("trigger_config.filter", f"does not parse: {message}") from None


def matches(expression: str, payload: dict[str, Any]) -> bool:
    """True when the filter holds for the payload; an empty filter matches all.

    Evaluation errors (a missing key, a type mismatch) mean "no match": an
    event that cannot be judged must not start a pipeline.
    """
    if not expression:
        return True
    import celpy

    program = compile_filter(expression)
    try:
        activation = {k: celpy.json_to_cel(v) for k, v in payload.items() if isinstance(k, str)}
        result = program.evaluate(activation)
    except Exception:
        return False
    if isinstance(result, Exception):
        return False
    return bool(result) is True and not isinstance(result, celpy.celtypes.StringType)
