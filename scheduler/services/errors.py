from scheduler.core import ConfigError, EtlError


class ServiceError(EtlError):
    """A refused action; `field` names the input at fault when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.problem = message
        super().__init__(message if not field or field in message else f"{field}: {message}")


class NotFound(ServiceError):
    pass


__all__ = ["ConfigError", "NotFound", "ServiceError"]


def check_text(value: object, *, field: str, max_length: int | None = None) -> str:
    """Free text from a caller: PostgreSQL cannot store NUL, and an over-long value must not become a 500."""
    text = "" if value is None else str(value)
    if "\x00" in text:
        raise ServiceError("must not contain the NUL character", field=field)
    if max_length is not None and len(text) > max_length:
        raise ServiceError(f"must be at most {max_length} characters, got {len(text)}", field=field)
    return text
