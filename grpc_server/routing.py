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

from a2a_platform.db import db
from agents.auth import Principal, caller_resolve, credentials_from_headers
from agents.errors import AuthenticationRequired
from agents.models import Agent
from tasks_app.errors import InvalidParamsError, task_not_found
from tasks_app.selectors import task_agent_path

AGENT_METADATA = "a2a-agent"


@dataclass(frozen=True)
class Route:
    agent: Agent
    principal: Principal


SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")


def _agent_path(path: str, source: str) -> tuple[str, str]:
    tenant_slug, sep, agent_slug = path.partition("/")
    if not (sep and SLUG.fullmatch(tenant_slug) and SLUG.fullmatch(agent_slug)):
        raise InvalidParamsError(
            f"{source} {path[:100]!r} is not an agent: it must be '<tenant-slug>/<agent-slug>'."
        )
    return tenant_slug, agent_slug


async def route_call(*, metadata: dict[str, str], tenant: str = "", task_id: str = "") -> Route:
    """The agent and principal of a call: from the process's cache of agents and keys when
    fresh (agents.auth.caller_resolve), so a call on a named agent needs no database hop."""
    named = metadata.get(AGENT_METADATA, "").strip()
    if tenant and named and tenant != named:
        raise InvalidParamsError(
            f"'tenant' {tenant[:100]!r} and {AGENT_METADATA} metadata {named[:100]!r} name "
            "different agents; send one, or the same value in both."
        )
    by_task = False
    if tenant:
        path = _agent_path(tenant, "'tenant'")
    elif named:
        path = _agent_path(named, f"{AGENT_METADATA} metadata")
    elif task_id:
        # On a task, the task decides; an unknown one is not found whatever the default agent
        # would say about the caller, so the answer does not tell which tasks exist.
        found = await db(task_agent_path)(task_id=task_id)
        if found is None:
            raise task_not_found(task_id)
        path, by_task = _agent_path(found, "the task's agent"), True
    elif settings.A2A_GRPC_DEFAULT_AGENT:
        path = _agent_path(settings.A2A_GRPC_DEFAULT_AGENT, "A2A_GRPC_DEFAULT_AGENT")
    else:
        raise InvalidParamsError(
            "This call names no agent and the server has no default one: set the request's "
            "'tenant' to '<tenant>/<agent>' (v1.0; the agent card's GRPC interface carries it) "
            f"or send '{AGENT_METADATA}: <tenant>/<agent>' metadata (v0.3)."
        )
    try:
        agent, principal = await caller_resolve(
            tenant_slug=path[0], agent_slug=path[1], raw_key=credentials_from_headers(metadata)
        )
    except AuthenticationRequired:
        if by_task:
            # The caller did not name this agent: that the task exists is not theirs to learn.
            raise task_not_found(task_id) from None
        raise
    return Route(agent=agent, principal=principal)


__all__ = ["AGENT_METADATA", "Route", "route_call"]
