"""One daemon thread of a kind per process (the supervisor, the heartbeat pump).

django-q2 forks its workers: a thread inherited from the parent does not run in the child, so `get()` starts a new
one whenever the one it holds belongs to another process or has died.
"""
from __future__ import annotations

import os
import threading
from typing import Self

_lock = threading.Lock()
_instances: dict[type, "PerProcessThread"] = {}


class PerProcessThread(threading.Thread):
    """A daemon thread with one instance per process; subclasses say how to make it (`make`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.pid = os.getpid()

    @classmethod
    def make(cls) -> Self:
        return cls()

    @classmethod
    def get(cls) -> Self:
        with _lock:
            current = _instances.get(cls)
            if current is None or current.pid != os.getpid() or not current.is_alive():
                current = _instances[cls] = cls.make()
                current.start()
            return current  # type: ignore[return-value]

    @classmethod
    def forget(cls) -> None:
        """Drop the instance (tests that replace it)."""
        with _lock:
            _instances.pop(cls, None)


__all__ = ["PerProcessThread"]
