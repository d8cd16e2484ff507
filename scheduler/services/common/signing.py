"""The HMAC-SHA256 signature of a webhook body: what our webhook door checks and what our own senders add."""
from __future__ import annotations

import hashlib
import hmac

from django.utils import timezone

TIMESTAMP_HEADER = "X-Etl-Timestamp"
SIGNATURE_HEADER = "X-Etl-Signature"


def compute_signature(secret: str, body: bytes, timestamp: int | str) -> str:
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def sign_webhook(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers a sender adds: use it in clients, tests and docs."""
    timestamp = int(timezone.now().timestamp()) if timestamp is None else int(timestamp)
    return {
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"sha256={compute_signature(secret, body, timestamp)}",
    }
