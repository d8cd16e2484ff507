from scheduler.core import ConfigError, EtlError


class ServiceError(EtlError):
    """A refused action; `field` names the input at fault when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message if not field or field in message else f"{field}: {message}")


class NotFound(ServiceError):
    pass


__all__ = ["ConfigError", "NotFound", "ServiceError"]
