"""Writes for tenants, agents and keys. Each service validates fully and owns its transaction."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .auth import hash_secret, new_key_material
from .executors import executor_config_validate
from .models import Agent, ApiKey, Tenant
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


__all__ = ["agent_create", "api_key_create", "executor_config_validate", "tenant_create"]
