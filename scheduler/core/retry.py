"""Retry policy with exponential backoff, wrapped around the extract step."""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, TypeVar

from .errors import ConfigError

T = TypeVar("T")


def _is_permanent(exc: BaseException) -> bool:
    # Duck-typed so sources need not import our error classes to opt out.
    return getattr(exc, "permanent", False) is True


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    initial_delay: float = 1.0
    backoff: float = 2.0
    max_delay: float = 60.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError("max_attempts", "must be an integer")
        if self.max_attempts < 1:
            raise ConfigError("max_attempts", "must be at least 1")
        for name in ("initial_delay", "backoff", "max_delay", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(name, "must be a number")
        if self.initial_delay < 0:
            raise ConfigError("initial_delay", "must not be negative")
        if self.max_delay < 0:
            raise ConfigError("max_delay", "must not be negative")
        if self.backoff < 1:
            raise ConfigError("backoff", "must be at least 1")
        if not 0 <= self.jitter <= 1:
            raise ConfigError("jitter", "must be between 0 and 1")

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if attempt < 1:
            raise ValueError("attempt is 1-based")
        # Cap the exponent's result before multiplying jitter; a huge attempt
        # number must not overflow a float.
        try:
            base = self.initial_delay * self.backoff ** (attempt - 1)
        except OverflowError:
            base = self.max_delay
        base = min(base, self.max_delay)
        if self.jitter:
            base *= 1 + self.jitter * (2 * rng() - 1)
        return max(0.0, base)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RetryPolicy":
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        unknown = set(data) - set(known)
        if unknown:
            raise ConfigError(sorted(unknown)[0], "unknown retry setting")
        return cls(**known)


def with_retry(
    policy: RetryPolicy,
    fn: Callable[..., T],
    *args: Any,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    on_retry: Callable[[int, BaseException, float], None] | None = None,
    retry_if: Callable[[BaseException], bool] | None = None,
    **kwargs: Any,
) -> T:
    """Call `fn` until it succeeds or the policy's attempts run out (`retry_if`: which errors are retried)."""
    attempt = 1
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if _is_permanent(exc) or attempt >= policy.max_attempts or (retry_if is not None and not retry_if(exc)):
                raise
            wait = policy.delay(attempt, rng)
            if on_retry is not None:
                on_retry(attempt, exc, wait)
            sleep(wait)
            attempt += 1
