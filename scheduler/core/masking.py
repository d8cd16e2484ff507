"""The secrets masker: every secret the process knows, replaced by `***` in text as it is written. Pure.

Like Airflow's secrets masker it matches *values*, not patterns that look
secret: a secret is registered when the process learns it (the server's own
at start-up, a connection's when it is resolved or set, a command's env value
marked secret when its run's environment is built), and from then on every
text written through a masked field (run logs, errors and reasons, node
records, audit entries, alerts, lineage events) has it replaced. One RE2
alternation of every registered value and its encoded forms (URL-quoted,
JSON-escaped) does the replacing in time linear in the text. Values shorter
than MIN_LENGTH are not registered: masking "pw" would mask every "pw".
"""
from __future__ import annotations

import json
import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

import re2

MASK = "***"
MIN_LENGTH = 5
#: how deep `mask_data` walks a structure (audit before/after, a run's report); deeper parts are kept as they are
MAX_DEPTH = 32


def forms(secret: str) -> set[str]:
    """The ways `secret` shows in text: as is, URL-quoted (a password in a URL), JSON-escaped (in a dump)."""
    found = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret, safe=""),
             json.dumps(secret)[1:-1]}
    return {form for form in found if len(form) >= MIN_LENGTH}


class Masker:
    """A set of secrets and the one pattern that finds any of them; thread-safe, `add` is idempotent."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()
        self._pattern: Any = None  # swapped whole under the lock: a reader sees an old or a new one, never half

    def add(self, secret: Any) -> bool:
        """Register a secret (a str; other values are ignored); True when it is new."""
        if not isinstance(secret, str) or len(secret.strip()) < MIN_LENGTH:
            return False
        new = forms(secret) - self._secrets
        if not new:
            return False
        with self._lock:
            self._secrets |= new
            # the longest first, so a secret containing another is replaced whole
            alternatives = sorted(self._secrets, key=lambda s: (-len(s), s))
            self._pattern = re2.compile("|".join(re2.escape(s) for s in alternatives))
        return True

    def add_all(self, secrets: Iterable[Any]) -> None:
        for secret in secrets:
            self.add(secret)

    def __contains__(self, secret: str) -> bool:
        return secret in self._secrets

    def mask(self, text: str) -> str:
        """`text` with every registered secret replaced by MASK."""
        pattern = self._pattern
        if pattern is None or not isinstance(text, str) or not text:
            return text
        plain = text if type(text) is str else str.__str__(text)  # RE2 wants a plain str (not a TextChoices)
        try:
            masked = pattern.sub(MASK, plain)
        except UnicodeEncodeError:  # a lone surrogate stored before it was refused: RE2 takes UTF-8 only
            masked = plain
            for secret in sorted(self._secrets, key=len, reverse=True):
                masked = masked.replace(secret, MASK)
        return text if masked == plain else masked

    def mask_data(self, value: Any, _depth: int = 0) -> Any:
        """JSON-like `value` with every string in it (keys too) masked; other values as they are."""
        if self._pattern is None or _depth > MAX_DEPTH:
            return value
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {self.mask(k) if isinstance(k, str) else k: self.mask_data(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.mask_data(v, _depth + 1) for v in value]
        return value

    def clear(self) -> None:
        """Forget every secret (tests)."""
        with self._lock:
            self._secrets = set()
            self._pattern = None


#: the process's one masker: the masked model fields write through it
masker = Masker()
