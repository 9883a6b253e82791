"""Writes for tenants, agents and keys. Each service validates fully and owns its transaction."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.db import transaction
from django.utils import timezone
from jwt.algorithms import ECAlgorithm

from . import crypto
from .auth import hash_secret, new_key_material
from .executors import executor_config_validate
from .models import Agent, ApiKey, SigningKey, Tenant
from .validation import agent_validate


@transaction.atomic
def tenant_create(*, slug: str, name: str = "") -> Tenant:
    tenant = Tenant(slug=slug, name=name or slug)
    tenant.full_clean()
    tenant.save()
    return tenant


@transaction.atomic
def agent_create(
    *,
    tenant: Tenant,
    slug: str,
    name: str,
    description: str,
    executor_kind: str,
    executor_config: dict[str, Any] | None = None,
    **fields: Any,
) -> Agent:
    agent = Agent(
        tenant=tenant,
        slug=slug,
        name=name,
        description=description,
        executor_kind=executor_kind,
        executor_config=executor_config or {},
        **fields,
    )
    agent_validate(agent)
    agent.full_clean()
    agent.save()
    return agent


@transaction.atomic
def api_key_create(
    *,
    tenant: Tenant,
    name: str,
    principal: str = "",
    scopes: list[str] | None = None,
    agent: Agent | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; return it with the full secret, which is never stored or shown again."""
    if agent is not None and agent.tenant_id != tenant.pk:
        raise ValueError("The key's agent must belong to the key's tenant.")
    prefix, secret = new_key_material()
    key = ApiKey(
        tenant=tenant,
        name=name,
        prefix=prefix,
        secret_hash=hash_secret(secret),
        principal=principal or name,
        scopes=scopes or [],
        agent=agent,
    )
    key.full_clean()
    key.save()
    return key, secret


def _jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: SHA-256 over the required members, sorted, without whitespace."""
    required = {name: jwk[name] for name in ("crv", "kty", "x", "y")}
    canonical = json.dumps(required, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def _signing_key_new(tenant: Tenant) -> SigningKey:
    private_key = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
    kid = _jwk_thumbprint(jwk)
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return SigningKey.objects.create(
        tenant=tenant,
        kid=kid,
        algorithm=SigningKey.ALGORITHM_ES256,
        private_key_encrypted=crypto.encrypt(pem),
        public_jwk={**jwk, "kid": kid, "alg": SigningKey.ALGORITHM_ES256, "use": "sig"},
    )


def _signing_key_newest(tenant: Tenant) -> SigningKey | None:
    return (
        SigningKey.objects.filter(tenant=tenant, retired_at__isnull=True)
        .order_by("-created_at", "-id")
        .first()
    )


def _tenant_lock(tenant: Tenant) -> None:
    # Serializes key creation per tenant (SQLite's IMMEDIATE transactions serialize anyway).
    Tenant.objects.select_for_update().only("pk").get(pk=tenant.pk)


def signing_key_active(*, tenant: Tenant) -> SigningKey:
    """The key that signs the tenant's pushes now: its newest unretired one, made on first use."""
    key = _signing_key_newest(tenant)
    if key is not None:
        return key
    with transaction.atomic():
        _tenant_lock(tenant)
        # Another process may have made it while this one waited for the lock.
        return _signing_key_newest(tenant) or _signing_key_new(tenant)


@transaction.atomic
def signing_key_rotate(*, tenant: Tenant) -> SigningKey:
    """A new signing key. The older ones stay published (receivers' cached JWKS keep
    verifying) until signing_key_retire retires them."""
    _tenant_lock(tenant)
    return _signing_key_new(tenant)


@transaction.atomic
def signing_key_retire(*, signing_key: SigningKey, at: datetime | None = None) -> SigningKey:
    """Stop publishing a key from `at` (default now). The active key must be rotated first."""
    _tenant_lock(signing_key.tenant)
    signing_key.refresh_from_db(fields=["retired_at"])
    if signing_key.retired_at is not None:
        return signing_key
    if _signing_key_newest(signing_key.tenant) == signing_key:
        raise ValueError("This key signs the tenant's pushes; rotate before retiring it.")
    signing_key.retired_at = at or timezone.now()
    signing_key.save(update_fields=["retired_at"])
    return signing_key


__all__ = [
    "agent_create",
    "api_key_create",
    "executor_config_validate",
    "signing_key_active",
    "signing_key_retire",
    "signing_key_rotate",
    "tenant_create",
]
