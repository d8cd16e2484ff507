from collections.abc import Iterator
from contextlib import contextmanager

from scheduler.core import ConfigError, EtlError
from scheduler.core.userdata import check_surrogates, text_problem


class ServiceError(EtlError):
    """A refused action; `field` names the input at fault when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.problem = message
        super().__init__(message if not field or field in message else f"{field}: {message}")

    @property
    def errors(self) -> list["ServiceError"]:
        """Every problem found: just this one (InvalidInput holds several)."""
        return [self]

    def message_under(self, field: str) -> str:
        """The problem as shown under the form field `field`: the form names the field, so only a sub-key stays.

        ("trigger_config.cron", "cron: bad") under trigger_config -> "cron: bad",
        never "trigger_config.cron: cron: bad"; ("window", "window: 20 windows exceed ...") under window ->
        "20 windows exceed ...", as the form says the field's name before it.
        """
        rest = (self.field or "")[len(field) + 1:] if (self.field or "").startswith(field + ".") else ""
        if rest and not self.problem.startswith(rest):
            return f"{rest}: {self.problem}"
        return self.problem if rest else self.problem.removeprefix(f"{field}: ")


class InvalidInput(ServiceError):
    """Several inputs refused at once; `errors` holds one ServiceError per problem, in the order checked."""

    def __init__(self, errors: list[ServiceError]) -> None:
        self._errors = errors
        super().__init__("; ".join(str(e) for e in errors))
        self.field = errors[0].field  # callers that name one field name the first

    @property
    def errors(self) -> list[ServiceError]:
        return list(self._errors)


class ErrorCollector:
    """Run several independent checks and report every failure, not just the first.

        found = ErrorCollector()
        with found.check():
            low = parse(start)
        ...
        found.raise_any()
    """

    def __init__(self) -> None:
        self.errors: list[ServiceError] = []

    @contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except ServiceError as exc:
            self.errors.extend(exc.errors)

    def failed(self, *fields: str) -> bool:
        """Whether any of `fields` (or anything at all, without arguments) was refused."""
        return any(not fields or (e.field or "").split(".")[0] in fields for e in self.errors)

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise InvalidInput(self.errors)


class NotFound(ServiceError):
    pass


class Conflict(ServiceError):
    """The target's current state refuses the action, not the input's form: a run already final, a backfill
    completed, a name another schedule has. The API answers 409; other doors show it like any refusal."""


__all__ = [
    "ConfigError", "Conflict", "ErrorCollector", "InvalidInput", "MAX_JSON_DEPTH", "NotFound", "ServiceError",
    "check_json_depth", "check_text",
]


def check_text(value: object, *, field: str, max_length: int | None = None) -> str:
    """Free text from a caller: PostgreSQL cannot store NUL, a lone surrogate is no text (it cannot be written as
    UTF-8: SQLite refuses it, and a stored one breaks every page that shows it), and an over-long value must not
    become a 500."""
    text = "" if value is None else str(value)
    problem = text_problem(text)
    if problem:
        raise ServiceError(problem, field=field)
    if max_length is not None and len(text) > max_length:
        raise ServiceError(f"must be at most {max_length} characters, got {len(text)}", field=field)
    return text


# Deeper JSON than this is no real payload; walking it recursively (NUL checks, CEL, templates) would overflow
# the stack.
MAX_JSON_DEPTH = 64


def check_json_depth(value: object, *, field: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Refuse JSON nested deeper than `limit` levels; iterative, so any depth is measured safely."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            raise ServiceError(f"is nested more than {limit} levels deep", field=field)
        stack.extend((child, depth + 1) for child in children)


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def check_storable(payload: dict, *, field: str) -> dict:
    """PostgreSQL's jsonb cannot hold the NUL character, nor any JSON a lone surrogate: refuse them here, naming the
    field (the key where the surrogate is), not with a 500."""
    if _has_nul(payload):
        raise ServiceError("must not contain the NUL character (\\u0000)", field=field)
    try:
        check_surrogates(payload, field=field)
    except ConfigError as exc:
        raise ServiceError(exc.problem, field=exc.field) from None
    return payload
