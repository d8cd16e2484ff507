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
