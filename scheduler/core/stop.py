"""A run's stop request as the running code sees it. Pure: no Django, no database.

A worker gives each run it executes a `StopToken` and makes it the current
token of the thread that runs the pipeline (`activate`). Whoever decides the
run must stop (a person's cancel read from the database, the run's timeout, a
worker that lost the database) calls `request`. The code sees it:

* `cancelled()` is True (a pipeline that wants to finish a batch first asks it);
* `check()` raises `RunStopped`, which the built-in sources and sinks call
  between batches and the workflow executor between nodes;
* `wait(seconds)` is a sleep that wakes early on a stop (retry back-off).

`RunStopped` is a BaseException, like KeyboardInterrupt: a pipeline's
`except Exception` (and the retry loop) does not swallow it, so a stop is
never retried and never recorded as a node's own failure.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

CANCEL, TIMEOUT, FENCE, TERMINATE = "cancel", "timeout", "fence", "terminate"
CANCEL_OTHER, SHUTDOWN = "cancel_other", "shutdown"
STOP_KINDS = (CANCEL, CANCEL_OTHER, TIMEOUT, FENCE, SHUTDOWN, TERMINATE)


class RunStopped(BaseException):
    """The run was asked to stop (`kind`, `reason`); raised by `check()` in the running code."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class StopRequest:
    kind: str
    reason: str
    at: float  # monotonic seconds when it was requested


class StopToken:
    """One run's stop request and deadlines; thread-safe, first request wins."""

    def __init__(self, *, timeout: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._event = threading.Event()
        self._lock = threading.Lock()
        self.request_: StopRequest | None = None
        self.started = clock()
        self.timeout = timeout
        # a workflow node's own timeout: (label, seconds, monotonic deadline); one node runs at a time
        self.node: tuple[str, float, float] | None = None

    # --- asking -------------------------------------------------------------
    def request(self, kind: str, reason: str) -> bool:
        """Ask the run to stop; False when a stop was asked already (the first reason stands)."""
        if kind not in STOP_KINDS:
            raise ValueError(f"unknown stop kind {kind!r}")
        with self._lock:
            if self.request_ is not None:
                return False
            self.request_ = StopRequest(kind, reason, self._clock())
        self._event.set()
        return True

    @property
    def requested(self) -> StopRequest | None:
        return self.request_

    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise RunStopped when a stop was asked (or a deadline passed, so a busy loop stops on time)."""
        self.expire()
        request = self.request_
        if request is not None:
            raise RunStopped(request.kind, request.reason)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True (at once) when a stop is asked meanwhile."""
        return self._event.wait(max(0.0, seconds))

    # --- deadlines ----------------------------------------------------------
    def expire(self) -> StopRequest | None:
        """Turn a passed deadline (the run's or the current node's) into a timeout request; the request."""
        now = self._clock()
        if self.request_ is None:
            if self.timeout is not None and now - self.started >= self.timeout:
                self.request(TIMEOUT, f"timed out after {_seconds(self.timeout)} s")
            elif self.node is not None and now >= self.node[2]:
                self.request(TIMEOUT, f"node '{self.node[0]}' timed out after {_seconds(self.node[1])} s")
        return self.request_

    @contextmanager
    def node_timeout(self, label: str, seconds: float | None) -> Iterator[None]:
        """The deadline of one workflow node while it runs (none: only the run's own)."""
        if not seconds:
            yield
            return
        self.node = (label, seconds, self._clock() + seconds)
        try:
            yield
        finally:
            self.node = None


def _seconds(value: float) -> str:
    return f"{value:g}"


# --- the current token of a thread ------------------------------------------------

_local = threading.local()
_NEVER = StopToken()  # the token of code that runs outside a worker: never stopped


def current() -> StopToken:
    """The token of the run this thread executes (a token that is never stopped outside a run)."""
    return getattr(_local, "token", None) or _NEVER


def cancelled() -> bool:
    """True when the run this thread executes was asked to stop."""
    return current().cancelled()


def check() -> None:
    """Raise RunStopped when the run this thread executes was asked to stop."""
    current().check()


@contextmanager
def activate(token: StopToken) -> Iterator[StopToken]:
    previous = getattr(_local, "token", None)
    _local.token = token
    try:
        yield token
    finally:
        _local.token = previous


__all__ = [
    "CANCEL",
    "CANCEL_OTHER",
    "FENCE",
    "SHUTDOWN",
    "RunStopped",
    "STOP_KINDS",
    "StopRequest",
    "StopToken",
    "TERMINATE",
    "TIMEOUT",
    "activate",
    "cancelled",
    "check",
    "current",
]
