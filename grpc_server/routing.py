"""Which agent a gRPC call is for, and who is calling: the sidecar's part of what URLs and
headers decide on HTTP.

One port serves every agent. A v1.0 request's `tenant` names the agent (`<tenant>/<agent>`, the
value its card's GRPC interface carries); v0.3 requests have no tenant and name it in `a2a-agent`
metadata. A call that names none on an existing task goes to that task's agent; otherwise to
the configured default agent, if there is one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from agents.auth import Principal, authenticate, credentials_from_headers
from agents.errors import AuthenticationRequired
from agents.models import Agent
from agents.selectors import agent_get_active
from tasks_app.errors import InvalidParamsError, task_not_found
from tasks_app.selectors import task_agent_path

AGENT_METADATA = "a2a-agent"


@dataclass(frozen=True)
class Route:
    agent: Agent
    principal: Principal


SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")


def _agent(path: str, source: str) -> Agent:
    tenant_slug, sep, agent_slug = path.partition("/")
    if not (sep and SLUG.fullmatch(tenant_slug) and SLUG.fullmatch(agent_slug)):
        raise InvalidParamsError(
            f"{source} {path[:100]!r} is not an agent: it must be '<tenant-slug>/<agent-slug>'."
        )
    return agent_get_active(tenant_slug=tenant_slug, agent_slug=agent_slug)


def route_call(*, metadata: dict[str, str], tenant: str = "", task_id: str = "") -> Route:
    """The agent and principal of a call. Sync: the servicers run it through Channels'
    `database_sync_to_async`, which closes stale connections around it as Django's request
    cycle does."""
    named = metadata.get(AGENT_METADATA, "").strip()
    if tenant and named and tenant != named:
        raise InvalidParamsError(
            f"'tenant' {tenant[:100]!r} and {AGENT_METADATA} metadata {named[:100]!r} name "
            "different agents; send one, or the same value in both."
        )
    by_task = False
    if tenant:
        agent = _agent(tenant, "'tenant'")
    elif named:
        agent = _agent(named, f"{AGENT_METADATA} metadata")
    elif task_id:
        # On a task, the task decides; an unknown one is not found whatever the default agent
        # would say about the caller, so the answer does not tell which tasks exist.
        path = task_agent_path(task_id=task_id)
        if path is None:
            raise task_not_found(task_id)
        agent, by_task = _agent(path, "the task's agent"), True
    elif settings.A2A_GRPC_DEFAULT_AGENT:
        agent = _agent(settings.A2A_GRPC_DEFAULT_AGENT, "A2A_GRPC_DEFAULT_AGENT")
    else:
        raise InvalidParamsError(
            "This call names no agent and the server has no default one: set the request's "
            "'tenant' to '<tenant>/<agent>' (v1.0; the agent card's GRPC interface carries it) "
            f"or send '{AGENT_METADATA}: <tenant>/<agent>' metadata (v0.3)."
        )
    try:
        principal = authenticate(agent=agent, raw_key=credentials_from_headers(metadata))
    except AuthenticationRequired:
        if by_task:
            # The caller did not name this agent: that the task exists is not theirs to learn.
            raise task_not_found(task_id) from None
        raise
    return Route(agent=agent, principal=principal)


__all__ = ["AGENT_METADATA", "Route", "route_call"]
