"""Secrets of an agent's executor: checked, sealed (encrypted at rest with agents.crypto) and
opened only to build the executor.

They are a JSON object of name -> secret string, given to the executor's constructor as
keyword arguments beside its plain config (the `python` kind's `init_kwargs`). A name may come
from one place only, so a secret never silently overrides a plain value or the reverse.
Errors name the secrets, never their values.
"""

from __future__ import annotations

import json
import keyword
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError

from agents import crypto

# Bounds on what one agent stores: room for API keys, tokens and PEM private keys, not for files.
SECRETS_MAX = 20
SECRET_NAME_MAX_LENGTH = 64
SECRET_MAX_LENGTH = 8192

# The key under which every secrets error is reported (a form's field of that name shows it).
FIELD = "executor_secrets"


def executor_secrets_validate(secrets: Any) -> dict[str, str]:
    """The secrets as a plain dict, sorted by name. Raises ValidationError keyed FIELD."""
    if not isinstance(secrets, Mapping):
        raise ValidationError({FIELD: 'Give a JSON object of name → secret: {"api_key": "…"}.'})
    if len(secrets) > SECRETS_MAX:
        raise ValidationError({FIELD: f"At most {SECRETS_MAX} secrets per agent."})
    problems = []
    for number, (name, value) in enumerate(secrets.items(), start=1):
        # A name that is not one is not repeated: it may be a secret pasted in the wrong place.
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            problems.append(f"The name of secret #{number} is not a Python identifier.")
        elif len(name) > SECRET_NAME_MAX_LENGTH:
            problems.append(
                f"The name of secret #{number} is longer than {SECRET_NAME_MAX_LENGTH} characters."
            )
        elif not isinstance(value, str):
            problems.append(f"{name}: the secret must be a string.")
        elif not value:
            problems.append(f"{name}: the secret is empty.")
        elif len(value) > SECRET_MAX_LENGTH:
            problems.append(f"{name}: the secret is longer than {SECRET_MAX_LENGTH} characters.")
    if problems:
        raise ValidationError({FIELD: problems})
    return {name: secrets[name] for name in sorted(secrets)}


def executor_secrets_seal(secrets: Mapping[str, str]) -> str:
    """The stored form of checked secrets: one encrypted JSON object, or "" for none."""
    if not secrets:
        return ""
    return crypto.encrypt(json.dumps(dict(secrets), sort_keys=True, separators=(",", ":")))


def executor_secrets_open(sealed: str) -> dict[str, str]:
    """The secrets as stored. Raises crypto.DecryptionFailed when no configured key opens them."""
    if not sealed:
        return {}
    secrets: dict[str, str] = json.loads(crypto.decrypt(sealed))
    return secrets


def executor_secret_names(sealed: str) -> list[str]:
    """The names of the stored secrets, sorted: what pages may show of them."""
    return sorted(executor_secrets_open(sealed))
