"""The `X-A2A-Signature` of push requests: an ES256 JWT over the body's hash and the task id.

See docs/push-verification.md for what a receiver checks; push_signature_verify is the
reference implementation of those checks.
"""

from __future__ import annotations

import hashlib
import hmac
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, TypedDict

import jwt
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from django.conf import settings
from django.utils import timezone

from . import crypto
from .models import SigningKey, Tenant
from .services import signing_key_active

PUSH_SIGNATURE_HEADER = "X-A2A-Signature"
PUSH_SIGNATURE_LIFETIME = timedelta(minutes=5)
# Allowed clock difference between the platform and a receiver.
DEFAULT_LEEWAY_SECONDS = 30.0
_REQUIRED_CLAIMS = ["iss", "iat", "exp", "jti", "task_id", "body_sha256"]


class PushSignatureClaims(TypedDict):
    iss: str
    iat: int
    exp: int
    jti: str
    task_id: str
    body_sha256: str


class PushSignatureInvalid(jwt.InvalidTokenError):
    """The signature does not verify, or does not cover this body or task."""


def _private_key(signing_key: SigningKey) -> Any:
    pem = crypto.decrypt(signing_key.private_key_encrypted)
    return load_pem_private_key(pem.encode(), password=None)


def push_signature(
    *, tenant: Tenant, body: bytes, task_id: str, now: datetime | None = None
) -> str:
    """The JWT to send as X-A2A-Signature with `body`, signed with the tenant's active key."""
    signing_key = signing_key_active(tenant=tenant)
    issued_at = int((now or timezone.now()).timestamp())
    claims: PushSignatureClaims = {
        "iss": settings.A2A_PUBLIC_BASE_URL,
        "iat": issued_at,
        "exp": issued_at + int(PUSH_SIGNATURE_LIFETIME.total_seconds()),
        "jti": str(uuid.uuid4()),
        "task_id": task_id,
        "body_sha256": hashlib.sha256(body).hexdigest(),
    }
    return jwt.encode(
        dict(claims),
        _private_key(signing_key),
        algorithm=signing_key.algorithm,
        headers={"kid": signing_key.kid, "typ": "JWT"},
    )


def push_signature_verify(
    token: str,
    body: bytes,
    jwks: Mapping[str, Any],
    *,
    task_id: str | None = None,
    issuer: str | None = None,
    leeway: float = DEFAULT_LEEWAY_SECONDS,
) -> dict[str, Any]:
    """The claims of a valid signature of `body`; PushSignatureInvalid (a jwt.InvalidTokenError)
    otherwise. With `task_id` or `issuer`, those claims must match too."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
        key = jwt.PyJWKSet.from_dict(dict(jwks))[kid] if isinstance(kid, str) else None
    except (jwt.PyJWKSetError, KeyError):
        key = None
    except jwt.InvalidTokenError as exc:
        raise PushSignatureInvalid(f"Malformed signature: {exc}") from exc
    if key is None:
        raise PushSignatureInvalid("The signature's key (kid) is not in the JWKS.")
    try:
        claims = jwt.decode(
            token,
            key,
            # Never the token's own choice: that is how alg=none and key confusion get in.
            algorithms=["ES256"],
            issuer=issuer,
            leeway=leeway,
            options={"require": _REQUIRED_CLAIMS},
        )
    except jwt.InvalidTokenError as exc:
        raise PushSignatureInvalid(str(exc)) from exc
    if not hmac.compare_digest(str(claims["body_sha256"]), hashlib.sha256(body).hexdigest()):
        raise PushSignatureInvalid("The signature does not cover this body.")
    if task_id is not None and claims["task_id"] != task_id:
        raise PushSignatureInvalid("The signature is for another task.")
    return claims
