"""Domain errors of the pure core; the app maps them to messages for users."""

from __future__ import annotations


class EtlError(Exception):
    """Base class for every error the core raises on purpose."""


class CycleError(EtlError):
    """A dependency graph contains a cycle; `cycle` is one concrete path."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = list(cycle)
        super().__init__("cycle: " + " -> ".join(str(n) for n in self.cycle))

    def __reduce__(self):  # type: ignore[override]
        # Task queues pickle exceptions; the default would rebuild from the
        # message and lose the path.
        return (type(self), (self.cycle,))


class PermanentError(EtlError):
    """An error retrying cannot fix (bad credentials, missing table, ...)."""

    permanent = True


class LoadError(EtlError):
    """A sink failed to load what it was given: not an extract error, so an extract's retries do not apply."""


class ConfigError(EtlError, ValueError):
    """Bad configuration; `field` names the offending field for forms and APIs."""

    def __init__(self, *args: str, field: str | None = None, message: str | None = None) -> None:
        # Accepts ConfigError(field, message) and ConfigError(message, field=...)
        # so callers in the app can use whichever reads better.
        if field is None:
            if len(args) != 2:
                raise TypeError("ConfigError needs a field and a message")
            field, message = args
        elif message is None:
            if len(args) != 1:
                raise TypeError("ConfigError needs a message")
            (message,) = args
        assert message is not None
        self.field = field
        self.problem = message
        # The message always names the field so a bare str(exc) shown
        # to a user still says which input to fix.
        text = message if field in message else f"{field}: {message}"
        super().__init__(text)

    def __reduce__(self):  # type: ignore[override]
        return (type(self), (self.field, self.problem))



def in_context(cause: BaseException, context: str) -> str:
    """The message of an error that wraps `cause`: the cause's own words first, then where it happened (a source
    and its window), on a line of its own. A list shows the first line, so a reader sees the cause, not a repr."""
    return f"{str(cause).strip() or type(cause).__name__}\n{context}"


def own_words(exc: BaseException) -> str:
    """An error's message as written for people: a domain error's (EtlError's) message alone; any other's with its
    type, which a bare message (KeyError's `'country'`) needs; a message-less error is its type's name."""
    text = str(exc).strip()
    if isinstance(exc, EtlError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure_reason(exc: BaseException, limit: int = 500) -> str:
    """A failed run's reason in at most `limit` characters: the cause's own words first; past the limit, the
    first line and the last (the context `in_context` put there) rather than a cut that loses the context."""
    text = own_words(exc)
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    if len(lines) == 1:
        return text[: limit - 1] + "…"
    tail = lines[-1][: limit // 2]
    return f"{lines[0][: limit - len(tail) - 3]}\n…\n{tail}"

def first_line(text: str) -> str:
    """The first line of a reason, for lists (the cause; its detail and context follow on the run's page)."""
    return (text or "").strip().split("\n", 1)[0].rstrip()
