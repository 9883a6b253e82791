"""Encryption of secrets at rest (Fernet), with the keys from settings.A2A_ENCRYPTION_KEYS.

The first key encrypts and every key decrypts, so keys rotate by prepending a new one. With no
keys configured, one is derived from SECRET_KEY (development only: production sets its own).

A model field whose name ends in `_encrypted` holds a token of this module (or ""):
encryption_keys_check reads a few of them at every start.
"""

from __future__ import annotations

import base64
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, transaction

# Changing this would make everything encrypted under the derived key unreadable.
_DERIVATION_INFO = b"a2a-platform/encryption-at-rest/v1"
# Rows read at each end of every table with encrypted fields by encryption_keys_check.
_CHECKED_ROWS = 3


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


def encryption_keys_check() -> None:
    """Raise ImproperlyConfigured, in one line, if the configured keys do not decrypt the
    secrets already stored. Every command that starts a process of the platform or writes to
    its tables calls this first: started with another key, a process would fail every push and
    signature, and store new secrets that the right key cannot read.

    It reads the `_encrypted` fields of the first and last few rows of each table that has any
    (a handful of queries, by primary key), so that keys that read the newest secrets but not
    the oldest (an old key dropped before its secrets were re-encrypted) are found too. Tables
    that cannot be read (not migrated yet) have nothing to check."""
    for model in apps.get_models():
        fields = [f.attname for f in model._meta.concrete_fields if f.name.endswith("_encrypted")]
        if not fields:
            continue
        rows = model._default_manager.values_list("pk", *fields)
        try:
            with transaction.atomic():  # a savepoint: a failed read spoils no outer transaction
                sample = [
                    *rows.order_by("pk")[:_CHECKED_ROWS],
                    *rows.order_by("-pk")[:_CHECKED_ROWS],
                ]
        except DatabaseError:
            continue
        for pk, *tokens in sample:
            for field, token in zip(fields, tokens, strict=True):
                if not token:
                    continue
                try:
                    _current().decrypt(token.encode())
                except InvalidToken:
                    raise ImproperlyConfigured(
                        _keys_do_not_fit(f"{model._meta.label} {pk}, {field}")
                    ) from None


def _keys_do_not_fit(where: str) -> str:
    if settings.A2A_ENCRYPTION_KEYS:
        return (
            f"No key of A2A_ENCRYPTION_KEYS decrypts the secrets stored in the database "
            f"({where}): set the key that encrypted them again, or, to rotate, list it after "
            "the new one (A2A_ENCRYPTION_KEYS=new,old)."
        )
    return (
        f"The encryption key derived from DJANGO_SECRET_KEY does not decrypt the secrets stored "
        f"in the database ({where}): start with the DJANGO_SECRET_KEY that stored them (make run: "
        "the var dir's secret_key file), or, to change it, set A2A_ENCRYPTION_KEYS to a new key "
        'followed by the old key\'s (docs/configuration.md, "Encryption keys").'
    )
