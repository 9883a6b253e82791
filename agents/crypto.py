"""Encryption of secrets at rest (Fernet), with the keys from settings.A2A_ENCRYPTION_KEYS.

The first key encrypts and every key decrypts, so keys rotate by prepending a new one. With no
keys configured, one is derived from SECRET_KEY (development only: production sets its own).
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Changing this would make everything encrypted under the derived key unreadable.
_DERIVATION_INFO = b"a2a-platform/encryption-at-rest/v1"


class DecryptionFailed(Exception):
    """A stored token is corrupt or was encrypted with a key no longer configured."""


def derived_key(secret_key: str) -> str:
    """The Fernet key used when A2A_ENCRYPTION_KEYS is unset: HKDF-SHA256 of SECRET_KEY."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DERIVATION_INFO).derive(
        secret_key.encode()
    )
    return base64.urlsafe_b64encode(raw).decode()


@lru_cache(maxsize=8)
def _fernet(keys: tuple[str, ...], secret_key: str) -> MultiFernet:
    if not keys:
        keys = (derived_key(secret_key),)
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "A2A_ENCRYPTION_KEYS must be comma-separated Fernet keys (32 url-safe base64 "
            "bytes each, as Fernet.generate_key() makes them)."
        ) from None


def _current() -> MultiFernet:
    # Keyed on the settings' values, so override_settings (and a rotation) take effect.
    keys = settings.A2A_ENCRYPTION_KEYS
    if isinstance(keys, str):
        keys = [k.strip() for k in keys.split(",") if k.strip()]
    return _fernet(tuple(keys), settings.SECRET_KEY)


def encrypt(text: str) -> str:
    return _current().encrypt(text.encode()).decode()


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed(
            "A stored secret cannot be decrypted with any of A2A_ENCRYPTION_KEYS "
            "(was the key it was encrypted with removed, or SECRET_KEY changed?)."
        ) from None


def reencrypt(token: str) -> str:
    """The token encrypted under the current first key (for re-keying stored rows)."""
    try:
        return _current().rotate(token.encode()).decode()
    except InvalidToken:
        raise DecryptionFailed("A stored secret cannot be decrypted for re-encryption.") from None
