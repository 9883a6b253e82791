"""Who calls which agent, in which version, asking for which extensions: the one caller
builder the JSON-RPC, REST and gRPC adapters call.

HTTP names the agent in the URL (`/a2a/<tenant>/<agent>/`, or the agent's own host name);
gRPC serves every agent on one port, so a call names it in the v1.0 request's `tenant`
(`<tenant>/<agent>`, the value the card's GRPC interface carries) or in `a2a-agent` metadata,
or was made to the agent's own port of the sidecar (A2A_GRPC_AGENT_PORTS; v0.3 cards carry
it) or host name (the front proxy passes the authority on as `x-forwarded-host`), or acts on a
task whose agent decides, or reaches the default agent. Credentials, `A2A-Version` and
`A2A-Extensions` are read from headers and metadata alike. The agent and key come from the
process's cache when fresh (agents.auth.caller_resolve), so a call needs no database hop.

Admission is decided here too (`admitted`): once a caller is authenticated, each A2A call must
speak a version its agent serves (`Agent.protocol_versions`), and is counted against its
tenant's and its key's request rates (agents.rates) before the operation runs, so a refused
call writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from a2a.extensions.common import get_requested_extensions
from django.conf import settings
from packaging.version import InvalidVersion, Version

from a2a_platform.db import db, fair_key
from a2a_platform.versions import SUPPORTED_VERSIONS, V0_1, V0_3, V1_0
from agents import rates, usage
from agents.auth import Principal, caller_resolve, credentials_from_headers
from agents.cache import call_limits
from agents.errors import AuthenticationRequired
from agents.hosts import LOOKUP, host_agent, host_agent_nowait
from agents.models import Agent, versions_parse
from audit import auth_failure
from tasks_app.errors import InvalidParamsError, VersionNotSupportedError, task_not_found
from tasks_app.operations import Caller
from tasks_app.selectors import task_agent_path

AGENT_METADATA = "a2a-agent"
# `x-a2a-extensions` is the name v0.3-era gRPC clients send.
EXTENSION_KEYS = ("a2a-extensions", "x-a2a-extensions")
_SPOKEN = ", ".join(SUPPORTED_VERSIONS)
# Where each version is served, for a request that sent one to a place that speaks another.
WHERE_VERSIONS_LIVE = {
    V1_0: "1.0 is served by REST directly under the agent's URL, by JSON-RPC with "
    "'A2A-Version: 1.0', and by the gRPC service lf.a2a.v1.A2AService.",
    V0_3: "0.3 is served by REST under the agent's v1/ path, by JSON-RPC without a version "
    "header, and by the gRPC service a2a.v1.A2AService.",
    V0_1: "0.1 is served by JSON-RPC only, at the agent's URL.",
}
# What makes a request speak each version, for a refusal that says why it was read so.
HOW_VERSIONS_ARE_SPOKEN = {
    V1_0: "as a JSON-RPC request with 'A2A-Version: 1.0', a REST path directly under the "
    "agent's URL and the gRPC service lf.a2a.v1.A2AService do",
    V0_3: "as a JSON-RPC request without an A2A-Version header, a REST path under the agent's "
    "v1/ path and the gRPC service a2a.v1.A2AService do",
    V0_1: "as a v0.1 method (tasks/send, tasks/sendSubscribe, agent/getCard, ...) or "
    "'A2A-Version: 0.1' does",
}
SLUG = re.compile(r"[-a-zA-Z0-9_]{1,100}")


# --- version and extensions ---------------------------------------------------------------


def dialect_of(header_value: str | None, query_value: str | None = None) -> str:
    """The request's protocol version, from the A2A-Version header or query parameter."""
    raw = (header_value or query_value or "").strip()
    if not raw:
        return V0_3  # the spec: an absent version means 0.3
    try:
        version = Version(raw)
    except (InvalidVersion, ValueError):  # ValueError: a number too long for int()
        raise VersionNotSupportedError(
            f"A2A-Version {raw[:40]!r} is not a version; this agent speaks {_SPOKEN}."
        ) from None
    major_minor = f"{version.major}.{version.minor}"
    if major_minor not in SUPPORTED_VERSIONS:
        raise VersionNotSupportedError(
            f"A2A-Version {raw[:40]} is not supported; this agent speaks {_SPOKEN}."
        )
    return major_minor


def version_check(sent: str | None, *, speaks: str, where: str) -> str:
    """Where the path (REST) or the service (gRPC) names the version, an `A2A-Version` sent
    with the request must agree; returns the version spoken."""
    if sent and sent.strip() and (asked := dialect_of(sent)) != speaks:
        raise VersionNotSupportedError(
            f"A2A-Version {asked} does not match {where}, which speaks {speaks}; "
            + WHERE_VERSIONS_LIVE[asked]
        )
    return speaks


@lru_cache(maxsize=64)
def _served(protocol_versions: str) -> frozenset[str]:
    """The versions an agent's `protocol_versions` names. Parsed once per value, not per call:
    every A2A call is checked, and agents share a handful of values. Keyed by the string, so
    the cached agents (agents.cache, shared read-only) are never written to."""
    return frozenset(versions_parse(protocol_versions))


def version_served(call: Caller) -> Caller:
    """The call, if its agent serves the version it speaks (`Agent.protocol_versions`); else
    VersionNotSupportedError naming the agent, the version spoken and those it serves, and
    where they are served."""
    agent = call.agent
    if call.dialect in _served(agent.protocol_versions):
        return call
    served = [v for v in SUPPORTED_VERSIONS if v in _served(agent.protocol_versions)]
    raise VersionNotSupportedError(
        f"Agent {agent.tenant.slug}/{agent.slug} serves A2A {' and '.join(served)}"
        f"{' only' if len(served) == 1 else ''}; this request speaks {call.dialect} "
        f"({HOW_VERSIONS_ARE_SPOKEN[call.dialect]}). "
        + " ".join(WHERE_VERSIONS_LIVE[v] for v in served)
    )


def unversioned_dialect(agent: Agent) -> str:
    """What a JSON-RPC request without A2A-Version speaks at `agent` when its method is a name
    of both 0.3 and 0.1 (tasks/get, tasks/cancel): 0.3, as the spec says, unless the agent
    serves 0.1 and not 0.3: v0.1 clients send no header, and it is their agent."""
    served = _served(agent.protocol_versions)
    return V0_1 if V0_1 in served and V0_3 not in served else V0_3


def requested_extensions(values: Iterable[str | None]) -> frozenset[str]:
    """The A2A-Extensions service parameter: URIs, comma-separated, possibly sent repeatedly."""
    return frozenset(get_requested_extensions([v for v in values if v]))


# --- the caller -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Identified:
    """The agent a request reaches and who calls it, or why the credentials were refused: a
    binding raises the refusal when its order of checks says so (JSON-RPC answers a malformed
    body before a missing key, as it always has)."""

    agent: Agent | None
    principal: Principal | None
    refused: AuthenticationRequired | None = None

    def caller(
        self,
        *,
        dialect: str,
        extensions: frozenset[str] = frozenset(),
        last_event_id: str | None = None,
    ) -> Caller:
        if self.refused is not None:
            raise self.refused
        assert self.agent is not None and self.principal is not None
        # The request's database work takes turns with other tenants' (a2a_platform.db).
        fair_key.set(self.agent.tenant_id)
        return Caller(
            agent=self.agent,
            principal=self.principal,
            last_event_id=last_event_id,
            extensions=extensions,
            dialect=dialect,
        )


def refusal_counted(
    refusal: AuthenticationRequired, *, tenant_id: int | None, agent_id: int | None, source: str
) -> None:
    """Count a refusal of an agent's in the audit log (audit.failures: in memory, written
    within seconds); `source`: the address the call came from."""
    if tenant_id is not None:
        auth_failure(
            tenant_id=tenant_id, agent_id=agent_id, reason=refusal.why, source=source or None
        )


async def agent_identify(
    *,
    tenant_slug: str,
    agent_slug: str,
    credentials: str | None,
    refused: AuthenticationRequired | None = None,
    source: str = "",
) -> Identified:
    """The agent `<tenant>/<agent>` and the principal `credentials` make; `refused`: the
    credentials could not even be read. An unknown agent is AgentNotFound whatever the
    credentials say, so a refusal never tells which agents exist. A refusal is counted in the
    audit log, from `source`."""
    try:
        agent, principal = await caller_resolve(
            tenant_slug=tenant_slug, agent_slug=agent_slug, raw_key=None if refused else credentials
        )
    except AuthenticationRequired as exc:
        refusal_counted(
            refused or exc, tenant_id=exc.tenant_id, agent_id=exc.agent_id, source=source
        )
        return Identified(agent=None, principal=None, refused=refused or exc)
    if refused is not None:
        refusal_counted(refused, tenant_id=agent.tenant_id, agent_id=agent.pk, source=source)
    return Identified(agent=agent, principal=None if refused else principal, refused=refused)


async def http_identify(
    *, tenant_slug: str, agent_slug: str, headers: Mapping[str, str], source: str = ""
) -> Identified:
    """The agent at an HTTP URL and who calls it, from the request's headers; `source`: the
    client's address (REMOTE_ADDR)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        credentials, refused = credentials_from_headers(lowered), None
    except AuthenticationRequired as exc:
        credentials, refused = None, exc
    return await agent_identify(
        tenant_slug=tenant_slug,
        agent_slug=agent_slug,
        credentials=credentials,
        refused=refused,
        source=source,
    )


async def admitted(call: Caller) -> Caller:
    """The call, if its agent serves the version it speaks (`version_served`, else
    VersionNotSupportedError) and its tenant's and its key's request rates have room for it
    (agents.rates), counted; else LimitExceeded (HTTP 429, RESOURCE_EXHAUSTED). Once per A2A
    call: REST and gRPC as the caller is built, JSON-RPC for each request object of a body
    once its version is known (a batch's calls count one by one). A tenant without rates
    costs nothing here: its limits were worked out when the agent was read
    (agents.cache.call_limits)."""
    version_served(call)
    agent, principal = call.agent, call.principal
    await rates.admit(
        limits=call_limits(agent, principal.key_limits),
        tenant=agent.tenant,
        key_id=principal.api_key_id,
        agent_id=agent.pk,
    )
    usage.count(tenant_id=agent.tenant_id, agent_id=agent.pk, requests=1)
    return call


def http_caller(identified: Identified, headers: Mapping[str, str], *, dialect: str) -> Caller:
    """The caller of an HTTP request: its agent, principal, version, extensions and the
    `Last-Event-ID` a reconnecting SSE client sends."""
    return identified.caller(
        dialect=dialect,
        extensions=requested_extensions([headers.get("A2A-Extensions")]),
        last_event_id=headers.get("Last-Event-ID"),
    )


# --- gRPC: one port, every agent --------------------------------------------------------------

# The authority a v0.3 call was made to, as the proxy in front of the sidecar copies it:
# grpcio does not give Python servers the `:authority` (grpc/grpc#38906). A client may send it
# itself; it only routes, like `a2a-agent`: the key decides what the call may do.
FORWARDED_HOST = "x-forwarded-host"


async def _host_agent(host: str) -> tuple[str, str] | None:
    found = host_agent_nowait(host) if host else None
    if found == LOOKUP:
        found = await db(host_agent)(host)
    return found  # type: ignore[return-value]


def _agent_path(path: str, source: str) -> tuple[str, str]:
    tenant_slug, sep, agent_slug = path.partition("/")
    if not (sep and SLUG.fullmatch(tenant_slug) and SLUG.fullmatch(agent_slug)):
        raise InvalidParamsError(
            f"{source} {path[:100]!r} is not an agent: it must be '<tenant-slug>/<agent-slug>'."
        )
    return tenant_slug, agent_slug


def _reached(agent: tuple[str, str], where: str, names: str) -> None:
    """A call made to an agent's own port or host is that agent's: one naming another agent
    (in `tenant`, `a2a-agent` or the authority) is refused rather than routed elsewhere."""
    if names and "/".join(agent) != names:
        raise InvalidParamsError(
            f"The call came to the {where} of agent {'/'.join(agent)!r} but names "
            f"{names[:100]!r}; call that agent's own {where}, or name none."
        )


async def grpc_caller(
    *,
    metadata: list[tuple[str, str]],
    speaks: str,
    service: str,
    tenant: str = "",
    task_id: str = "",
    bound: tuple[str, str] | None = None,
    source: str = "",
) -> Caller:
    """The caller of a gRPC call, from its metadata (lower-case keys, in order), the request's
    `tenant` (v1.0) and the task it acts on, if any; `bound`: the agent whose own port the call
    came to (A2A_GRPC_AGENT_PORTS), which it may not name another agent on; `source`: the
    peer's address, for the audit log's count of refusals."""
    for key in ("a2a-version", AGENT_METADATA, "authorization", "x-api-key"):
        if len({v for k, v in metadata if k == key}) > 1:
            raise InvalidParamsError(
                f"Metadata {key!r} was sent more than once with different values."
            )
    values = dict(metadata)
    dialect = version_check(
        values.get("a2a-version"), speaks=speaks, where=f"the gRPC service {service}"
    )
    named = values.get(AGENT_METADATA, "").strip()
    if tenant and named and tenant != named:
        raise InvalidParamsError(
            f"'tenant' {tenant[:100]!r} and {AGENT_METADATA} metadata {named[:100]!r} name "
            "different agents; send one, or the same value in both."
        )
    at_host = await _host_agent(values.get(FORWARDED_HOST, ""))
    if bound:
        _reached(bound, "port", tenant or named or "/".join(at_host or ()))
    elif at_host:
        _reached(at_host, "host", tenant or named)
    reached = bound or at_host
    by_task = False
    if tenant:
        path = _agent_path(tenant, "'tenant'")
    elif named:
        path = _agent_path(named, f"{AGENT_METADATA} metadata")
    elif reached:
        path = reached
    elif task_id:
        # On a task, the task decides; an unknown one is not found whatever the default agent
        # would say about the caller, so the answer does not tell which tasks exist.
        found = await db(task_agent_path)(task_id=task_id)
        if found is None:
            raise task_not_found(task_id)
        path, by_task = _agent_path(found, "the task's agent"), True
    elif settings.A2A_DEFAULT_AGENT:
        path = _agent_path(settings.A2A_DEFAULT_AGENT, "A2A_DEFAULT_AGENT")
    else:
        raise InvalidParamsError(
            "This call names no agent and the server has no default one: set the request's "
            "'tenant' to '<tenant>/<agent>' (v1.0; the agent card's GRPC interface carries it) "
            f"or send '{AGENT_METADATA}: <tenant>/<agent>' metadata (v0.3)."
        )
    try:
        agent, principal = await caller_resolve(
            tenant_slug=path[0], agent_slug=path[1], raw_key=credentials_from_headers(values)
        )
    except AuthenticationRequired as exc:
        refusal_counted(exc, tenant_id=exc.tenant_id, agent_id=exc.agent_id, source=source)
        if by_task:
            # The caller did not name this agent: that the task exists is not theirs to learn.
            raise task_not_found(task_id) from None
        raise
    extensions = requested_extensions(v for k, v in metadata if k in EXTENSION_KEYS)
    return await admitted(
        Identified(agent=agent, principal=principal).caller(dialect=dialect, extensions=extensions)
    )
