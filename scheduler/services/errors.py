from scheduler.core import ConfigError, EtlError


class ServiceError(EtlError):
    """A refused action; `field` names the input at fault when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        self.problem = message
        super().__init__(message if not field or field in message else f"{field}: {message}")


class NotFound(ServiceError):
    pass


__all__ = ["ConfigError", "MAX_JSON_DEPTH", "NotFound", "ServiceError", "check_json_depth", "check_text"]


def check_text(value: object, *, field: str, max_length: int | None = None) -> str:
    """Free text from a caller: PostgreSQL cannot store NUL, and an over-long value must not become a 500."""
    text = "" if value is None else str(value)
    if "\x00" in text:
        raise ServiceError("must not contain the NUL character", field=field)
    if max_length is not None and len(text) > max_length:
        raise ServiceError(f"must be at most {max_length} characters, got {len(text)}", field=field)
    return text


# Deeper JSON than this is no real payload; walking it recursively (NUL checks, CEL, templates) would overflow the stack.
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
