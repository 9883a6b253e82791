"""Reads for agents."""

from __future__ import annotations

from .errors import AgentNotFound
from .models import Agent


def agent_get_active(*, tenant_slug: str, agent_slug: str) -> Agent:
    agent = (
        Agent.objects.select_related("tenant")
        .filter(tenant__slug=tenant_slug, slug=agent_slug, is_active=True, tenant__is_active=True)
        .first()
    )
    if agent is None:
        raise AgentNotFound(tenant_slug, agent_slug)
    return agent
