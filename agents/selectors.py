"""Reads for agents, tenants and their published signing keys."""

from __future__ import annotations

from typing import Any, TypedDict

from django.db.models import F, Q
from django.utils import timezone

from .errors import AgentNotFound
from .models import Agent, Issuer, SigningKey, Tenant


def agent_get_active(*, tenant_slug: str, agent_slug: str) -> Agent:
    agent = (
        Agent.objects.select_related("tenant", "tenant__plan")
        .filter(tenant__slug=tenant_slug, slug=agent_slug, is_active=True, tenant__is_active=True)
        .first()
    )
    if agent is None:
        raise AgentNotFound(tenant_slug, agent_slug)
    return agent


def agent_path_at_domain(domain: str) -> tuple[str, str] | None:
    """The `(tenant, agent)` slugs of the active agent whose custom domain this is."""
    return (
        Agent.objects.filter(custom_domain=domain, is_active=True, tenant__is_active=True)
        .values_list("tenant__slug", "slug")
        .first()
    )


class JWKS(TypedDict):
    keys: list[dict[str, Any]]


def tenant_get_active(*, tenant_slug: str) -> Tenant:
    """An active tenant by slug; Tenant.DoesNotExist otherwise."""
    return Tenant.objects.get(slug=tenant_slug, is_active=True)


def jwks_for(*, tenant: Tenant | None = None) -> JWKS:
    """The published push-signing keys as a JWK Set: one tenant's, or every active tenant's.

    A key is published from its creation until its retirement time, newest first.
    """
    now = timezone.now()
    keys = SigningKey.objects.filter(
        Q(retired_at__isnull=True) | Q(retired_at__gt=now), tenant__is_active=True
    )
    if tenant is not None:
        keys = keys.filter(tenant=tenant)
    return {"keys": [k.public_jwk for k in keys.order_by("-created_at", "-id")]}


def issuers_for(*, tenant_id: int) -> list[Issuer]:
    """The active issuers whose tokens call the tenant's agents: its own, then the
    platform-wide ones, oldest first."""
    return list(
        Issuer.objects.filter(
            Q(tenant_id=tenant_id) | Q(tenant__isnull=True), is_active=True
        ).order_by(F("tenant_id").asc(nulls_last=True), "created_at", "pk")
    )
