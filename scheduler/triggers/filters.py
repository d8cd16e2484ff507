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
"""
from __future__ import annotations

import logging
import time
from functools import lru_cache
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import Evaluator

from scheduler.core import ConfigError

log = logging.getLogger(__name__)

MAX_FILTER_LENGTH = 2000
FIELD = "trigger_config.filter"
MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
MAX_NESTED_MACROS = 2
MAX_MACROS = 8
MAX_FILTER_STEPS = 100_000
MAX_FILTER_SECONDS = 1.0


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
        return env.program(ast)
    except RecursionError:
        raise ConfigError(FIELD, "is nested too deeply") from None


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
