"""Event filters in CEL (Common Expression Language), evaluated in a sandbox.

User text is parsed by celpy, never by Python's eval: a filter can read the
payload's fields and call CEL's own functions, nothing else. A filter that
does not parse is refused when the schedule is saved, with the parser's
position and the text near it.

A filter's cost is bounded twice. At save time an expression that is
statically too costly (comprehensions nested more than MAX_NESTED_MACROS
deep, more than MAX_MACROS of them) or that names a dunder attribute such as
`__class__` is refused. At evaluation every step of the interpreter is
counted and the clock is read: past MAX_FILTER_STEPS steps or
MAX_FILTER_SECONDS the filter stops and the event does not match (regular
expressions run on RE2, in linear time).

The step budget is counted between steps, so one step that runs long is not
interrupted: the arguments of duration(), timestamp() and matches() are
checked first, in linear time (a literal one when the filter is saved, every
one at each call), and the payload is bounded in size and nesting before any
CEL value is built from it (`check_payload`; event_emit refuses a larger
event for a schedule with a filter).
"""
from __future__ import annotations

import json
import logging
import time
from functools import lru_cache
from typing import Any

import celpy
import lark
import re2
from celpy import celtypes
from celpy.evaluation import Evaluator, function_matches

from scheduler.core import ConfigError
from scheduler.core.userdata import check_depth, excerpt

log = logging.getLogger(__name__)

MAX_FILTER_LENGTH = 2000
FIELD = "trigger_config.filter"
MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
MAX_NESTED_MACROS = 2
MAX_MACROS = 8
MAX_FILTER_STEPS = 100_000
MAX_FILTER_SECONDS = 1.0
# What a filter is given: larger or deeper payloads are refused before any CEL value is built (a 900 KB map
# became 630 MB of CEL objects).
MAX_FILTER_PAYLOAD_BYTES = 64 * 1024
MAX_FILTER_PAYLOAD_DEPTH = 64  # as every JSON input (services.errors.MAX_JSON_DEPTH)
# The budget is counted between steps of the interpreter; one step that runs long (celpy's duration parser
# backtracks catastrophically on 27 characters) is not interrupted, so these functions' arguments are checked
# first, in linear time (RE2), at save time for literals and at every call.
MAX_ARGUMENT_CHARS = 64
MAX_PATTERN_CHARS = 500
DURATION = re2.compile(r"^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|ms|s|m|h|d))+$")
TIMESTAMP = re2.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
                        r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})$")


class FilterTooCostly(Exception):
    """The evaluation ran past its step or time budget."""


class _Budget:
    def __init__(self, steps: int, seconds: float) -> None:
        self.left = steps
        self.deadline = time.monotonic() + seconds

    def charge(self) -> None:
        self.left -= 1
        if self.left % 64 == 0 and time.monotonic() > self.deadline:
            self.left = min(self.left, -1)  # out of time: every later step fails at once too
        if self.left < 0:
            raise FilterTooCostly("the filter ran past its step or time budget")

    def spent(self) -> bool:
        return self.left < 0


class _BudgetEvaluator(Evaluator):
    """celpy's tree-walking evaluator, charging one step per node visited (comprehension bodies included)."""

    budget: _Budget

    def visit(self, tree):
        self.budget.charge()
        return super().visit(tree)

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        nested = _BudgetEvaluator(ast, activation=self.activation)
        nested.budget = self.budget
        return nested


class _BudgetRunner(celpy.InterpretedRunner):
    def evaluate(self, context, *, budget: _Budget | None = None):
        evaluator = _BudgetEvaluator(ast=self.ast, activation=self.new_activation())
        evaluator.budget = budget or _Budget(MAX_FILTER_STEPS, MAX_FILTER_SECONDS)
        return evaluator.evaluate(context)


def _duration_problem(value: str) -> str | None:
    if len(value) > MAX_ARGUMENT_CHARS or not DURATION.match(value):
        return f"duration('{excerpt(value, 20)}') is not a duration such as '90s', '1h30m' or '-1.5h'"
    return None


def _timestamp_problem(value: str) -> str | None:
    if len(value) > MAX_ARGUMENT_CHARS or not TIMESTAMP.match(value):
        return f"timestamp('{excerpt(value, 20)}') is not a timestamp such as '2026-03-01T12:00:00Z'"
    return None


def _pattern_problem(pattern: str) -> str | None:
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"matches(): the pattern is longer than {MAX_PATTERN_CHARS} characters"
    try:
        re2.compile(pattern)
    except re2.error:
        return f"matches(): the pattern '{excerpt(pattern, 20)}' is not a regular expression"
    return None


def _safe_duration(value: Any, *rest: Any) -> Any:
    if isinstance(value, str) and (problem := _duration_problem(value)):
        raise ValueError(problem)  # celpy turns it into a CEL error value: no match
    return celtypes.DurationType(value, *rest)


def _safe_timestamp(value: Any, *rest: Any) -> Any:
    if isinstance(value, str) and (problem := _timestamp_problem(value)):
        raise ValueError(problem)
    return celtypes.TimestampType(value, *rest)


def _safe_matches(text: Any, pattern: Any) -> Any:
    if isinstance(pattern, str) and (problem := _pattern_problem(pattern)):
        raise ValueError(problem)
    return function_matches(text, pattern)


FUNCTIONS = {"duration": _safe_duration, "timestamp": _safe_timestamp, "matches": _safe_matches}
# which argument of each checked function is checked, and how
_CHECKED_ARGUMENT = {"duration": (0, _duration_problem), "timestamp": (0, _timestamp_problem),
                     "matches": (1, _pattern_problem)}


def _string_literal(expr: Any) -> str | None:
    """The text of an argument that is a plain string literal ("1s", '1s'; no escapes, no raw or bytes)."""
    node = expr
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, lark.Token) and len(node.value) >= 2 and node.value[0] in "\"'" \
            and node.value[-1] == node.value[0] and "\\" not in node.value and node.value[0] not in node.value[1:-1]:
        return node.value[1:-1]
    return None


def _check_literal_call(node: lark.Tree) -> None:
    """Refuse a call of duration / timestamp / matches whose literal argument would be refused at every run."""
    if node.data == "ident_arg":
        name, args, offset = str(node.children[0]), node.children[1:], 0
    elif node.data == "member_dot_arg":
        name = next((c.value for c in node.children if isinstance(c, lark.Token) and c.type == "IDENT"), "")
        args, offset = node.children[2:], 1  # the receiver is the first argument of a method
    else:
        return
    if name not in _CHECKED_ARGUMENT or not args or not isinstance(args[0], lark.Tree):
        return
    position, problem_of = _CHECKED_ARGUMENT[name]
    exprs = args[0].children
    index = position - offset
    if 0 <= index < len(exprs):
        text = _string_literal(exprs[index])
        problem = problem_of(text) if text is not None else None
        if problem:
            raise ConfigError(FIELD, problem)


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


def _static_checks(ast: lark.Tree) -> None:
    """Refuse dunder names and comprehensions nested or repeated past the static cost limits."""
    macros = 0
    # (node, comprehension depth of the enclosing nodes); an explicit stack, the tree may be deep
    stack: list[tuple[Any, int]] = [(ast, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, lark.Token):
            if node.type == "IDENT" and node.value.startswith("__"):
                raise ConfigError(FIELD, f"may not use '{node.value}': names starting with '__' are not allowed")
            continue
        if not isinstance(node, lark.Tree):
            continue
        _check_literal_call(node)
        if node.data == "member_dot_arg":
            name = next((c.value for c in node.children if isinstance(c, lark.Token) and c.type == "IDENT"), "")
            if name in MACROS:
                macros += 1
                depth += 1
                if depth > MAX_NESTED_MACROS:
                    raise ConfigError(FIELD, f"is too costly: comprehensions ({', '.join(sorted(MACROS))}) "
                                             f"nested more than {MAX_NESTED_MACROS} deep")
                if macros > MAX_MACROS:
                    raise ConfigError(FIELD, f"is too costly: more than {MAX_MACROS} comprehensions")
        stack.extend((child, depth) for child in node.children)


@lru_cache(maxsize=512)
def compile_filter(expression: str):
    """The compiled program for a filter, or ConfigError naming trigger_config.filter."""
    if not isinstance(expression, str):
        raise ConfigError(FIELD, "must be a string expression such as status == 'confirmed'")
    if len(expression) > MAX_FILTER_LENGTH:
        raise ConfigError(FIELD, f"is longer than {MAX_FILTER_LENGTH} characters")
    if "\x00" in expression:
        raise ConfigError(FIELD, "contains a NUL character")
    env = celpy.Environment(runner_class=_BudgetRunner)
    try:
        ast = env.compile(expression)
    except celpy.CELParseError as exc:
        raise ConfigError(FIELD, _parse_problem(expression, exc)) from None
    except RecursionError:
        raise ConfigError(FIELD, "is nested too deeply") from None
    except Exception as exc:  # noqa: BLE001  celpy's lark front end raises other parse errors too
        raise ConfigError(FIELD, _parse_problem(expression, exc)) from None
    _static_checks(ast)
    try:
        return env.program(ast, functions=FUNCTIONS)
    except RecursionError:
        raise ConfigError(FIELD, "is nested too deeply") from None


def check_payload(payload: Any) -> None:
    """ConfigError naming `payload` when it is larger or deeper than a filter may be given."""
    check_depth(payload, field="payload", limit=MAX_FILTER_PAYLOAD_DEPTH,
                why="the most an event filter reads")
    size = len(json.dumps(payload, default=str))
    if size > MAX_FILTER_PAYLOAD_BYTES:
        raise ConfigError("payload", f"is larger than {MAX_FILTER_PAYLOAD_BYTES} bytes ({size}), "
                                     "the most an event filter reads")


def matches(expression: str, payload: dict[str, Any]) -> bool:
    """True when the filter holds for the payload; an empty filter matches all.

    Only a boolean true matches. Evaluation errors (a missing key, a type
    mismatch such as int > double), non-boolean results and evaluations past
    their budget mean "no match": an event that cannot be judged must not
    start a pipeline.
    """
    if not expression:
        return True
    program = compile_filter(expression)
    try:
        check_payload(payload)
    except ConfigError as exc:  # event_emit refuses such events first; this guards every other caller
        log.warning("event filter %r not evaluated: %s", expression[:200], exc)
        return False
    budget = _Budget(MAX_FILTER_STEPS, MAX_FILTER_SECONDS)
    try:
        activation = {k: celpy.json_to_cel(v) for k, v in payload.items() if isinstance(k, str)}
        result = program.evaluate(activation, budget=budget)
    except Exception:  # noqa: BLE001  a filter error of any kind means "no match"
        result = None
    # celpy turns some exceptions into CEL error values: the budget itself says whether it ran out
    if budget.spent():
        log.warning("event filter %r stopped after its budget (%d steps, %g s); the event does not match",
                    expression[:200], MAX_FILTER_STEPS, MAX_FILTER_SECONDS)
        return False
    return isinstance(result, celtypes.BoolType) and bool(result)
