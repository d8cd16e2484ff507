"""Secrets at rest: Fernet tokens under the keys of ETL_CONNECTION_KEYS (cryptography's MultiFernet).

ETL_CONNECTION_KEYS is a comma-separated list of Fernet keys (make one with
`python manage.py connection generate-key`): the first encrypts, every one
decrypts, so a new key goes first, the old one stays behind it until
`manage.py connection rotate-key` has re-encrypted every stored secret under
the new one, and then leaves. With the embedded SQLite set-up and no keys
set, a development key derived from SECRET_KEY (HKDF-SHA256) is used; it is
also kept as the last decrypting key there, so secrets stored before keys
were set still open and rotate. With PostgreSQL and no keys, storing a secret
is refused: the database must not hold secrets whose key sits beside it.

This module imports no other service.
"""
from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from scheduler.services.common.errors import ServiceError

DEV_KEY_INFO = b"etl-scheduler connection secrets (development key)"


class NoKeys(ServiceError):
    """No key to encrypt with: ETL_CONNECTION_KEYS is not set (and this is not the embedded SQLite set-up)."""


def generate_key() -> str:
    return Fernet.generate_key().decode()


def dev_key() -> str:
    """The development key: HKDF-SHA256 of SECRET_KEY (the embedded SQLite set-up only)."""
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=DEV_KEY_INFO).derive(
        settings.SECRET_KEY.encode())
    return base64.urlsafe_b64encode(derived).decode()


def _embedded() -> bool:
    return settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"


def keys() -> list[str]:
    """The keys in force, the encrypting one first."""
    given = [key for key in getattr(settings, "ETL_CONNECTION_KEYS", []) if key]
    if _embedded() and dev_key() not in given:
        given.append(dev_key())
    return given


def _fernet() -> MultiFernet:
    found = keys()
    if not found:
        raise NoKeys("no key to encrypt secrets with: set ETL_CONNECTION_KEYS (python manage.py connection "
                     "generate-key makes one); see docs/security.md, \"Connections\"", field="ETL_CONNECTION_KEYS")
    try:
        return MultiFernet([Fernet(key) for key in found])
    except ValueError:
        raise NoKeys("a key of ETL_CONNECTION_KEYS is not a Fernet key (32 url-safe base64-encoded bytes)",
                     field="ETL_CONNECTION_KEYS") from None


def encrypt(text: str) -> str:
    return _fernet().encrypt(text.encode("utf-8", "surrogatepass")).decode()


def decrypt(token: str) -> str:
    """The text of a token; ServiceError when no key in force opens it (a key was dropped too soon)."""
    try:
        return _fernet().decrypt(token.encode()).decode("utf-8", "surrogatepass")
    except InvalidToken:
        raise ServiceError("a stored secret cannot be decrypted with the keys of ETL_CONNECTION_KEYS (was the key "
                           "that encrypted it removed before `connection rotate-key` ran?)", field="secret") from None


def rotate(token: str) -> str:
    """The token re-encrypted under the first key (MultiFernet.rotate)."""
    try:
        return _fernet().rotate(token.encode()).decode()
    except InvalidToken:
        raise ServiceError("a stored secret cannot be decrypted with the keys of ETL_CONNECTION_KEYS",
                           field="secret") from None


def check_keys(values: list[str]) -> list[str]:
    """`values` when each is a Fernet key; ValueError naming the bad one's position (settings use it)."""
    for i, key in enumerate(values):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(f"key {i + 1} is not a Fernet key (32 url-safe base64-encoded bytes)") from None
    return values


__all__ = ["NoKeys", "check_keys", "decrypt", "dev_key", "encrypt", "generate_key", "keys", "rotate"]
