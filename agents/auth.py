"""Who is calling an agent: API keys, anonymous callers, and the owner scope of their tasks."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from django.utils import timezone

from .errors import AuthenticationRequired
from .models import Agent, ApiKey

KEY_PREFIX = "a2a"
ANONYMOUS_OWNER = "anonymous"


@dataclass(frozen=True)
class Principal:
    """The caller of one request, as the services see it."""

    owner: str
    is_tenant_admin: bool = False
    is_anonymous: bool = False
    can_list: bool = True
    api_key_id: int | None = None


def hash_secret(secret: str) -> str:
    # Keys are 190-bit random strings, so a fast digest is enough; a slow KDF buys nothing.
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key_material() -> tuple[str, str]:
    """Return (prefix, full key). The full key is shown once and never stored."""
    prefix = secrets.token_hex(4)
    return prefix, f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"


def credentials_from_headers(headers: dict[str, str]) -> str | None:
    """The API key from `Authorization: Bearer <key>` or `X-API-Key: <key>` (lower-case names)."""
    authorization = headers.get("authorization", "").strip()
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthenticationRequired("The Authorization header must be 'Bearer <api key>'.")
        return value.strip()
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None


def authenticate(*, agent: Agent, raw_key: str | None, require_key: bool = False) -> Principal:
    """Resolve the caller of `agent`. Raises AuthenticationRequired (HTTP 401)."""
    if raw_key is None:
        if require_key:
            raise AuthenticationRequired("This operation requires an API key.")
        if not agent.is_public:
            raise AuthenticationRequired(
                "This agent is private: send an API key as 'Authorization: Bearer <key>' "
                "or 'X-API-Key: <key>'."
            )
        shared = agent.anonymous_scope == Agent.AnonymousScope.SHARED
        return Principal(owner=ANONYMOUS_OWNER, is_anonymous=True, can_list=shared)

    key = _key_for(agent=agent, raw_key=raw_key)
    if key is None:
        raise AuthenticationRequired("The API key is not valid for this agent.")
    now = timezone.now()
    if key.last_used_at is None or (now - key.last_used_at).total_seconds() > 60:
        # At most one write a minute per key, so hot keys don't turn every read into a write.
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return Principal(
        owner=f"key:{key.principal}",
        is_tenant_admin=key.is_tenant_admin,
        api_key_id=key.pk,
    )


def _key_for(*, agent: Agent, raw_key: str) -> ApiKey | None:
    parts = raw_key.split("_")
    if len(parts) < 3 or parts[0] != KEY_PREFIX:
        return None
    key = (
        ApiKey.objects.filter(prefix=parts[1], tenant_id=agent.tenant_id, revoked_at__isnull=True)
        .only("id", "secret_hash", "principal", "scopes", "agent_id", "last_used_at")
        .first()
    )
    if key is None or not hmac.compare_digest(key.secret_hash, hash_secret(raw_key)):
        return None
    if key.agent_id is not None and key.agent_id != agent.pk:
        return None
    return key
