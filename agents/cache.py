"""The rows every A2A call starts from, kept per process for `A2A_AUTH_CACHE_SECONDS`: the
active agent at a URL, an API key's row by its (public) prefix, and (for agent runs) an agent
by its id.

A time bound, not invalidation messages: agents, tenants and keys change through the admin, the
console, the services, management commands, queryset updates, cascades and SQL, and every
process (each daphne, the gRPC sidecar) would have to hear of each. An entry is used only while
younger than the bound, counted from before the query that read it, so whatever committed
before that query is seen, and a change (a revoked key, a deactivated agent or tenant) reaches
every process within the bound, with nothing to coordinate. docs/decisions.md has the numbers.

Only rows are cached, never a decision: the caller's secret is compared with the stored digest
on every call (agents.auth), and no raw key is kept. What is not found is not cached (a new
agent or key works at once; made-up names cannot fill the cache).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from django.conf import settings

from . import plans
from .models import Agent, ApiKey, Issuer, Plan, Tenant
from .selectors import agent_get_active, agent_path_at_domain, issuers_for

K = TypeVar("K")
V = TypeVar("V")

# Entries per cache before it starts again empty: far more agents and keys than one process
# serves at a time, and a bound on memory whatever callers send.
MAX_ENTRIES = 10_000

# Replaced by tests to move time on.
clock: Callable[[], float] = time.monotonic


class _Timed(Generic[K, V]):
    def __init__(self) -> None:
        self._entries: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if clock() >= entry[0]:
            self._entries.pop(key, None)
            return None
        return entry[1]

    def put(self, key: K, value: V, read_at: float) -> None:
        seconds = settings.A2A_AUTH_CACHE_SECONDS
        if seconds <= 0:
            return
        if len(self._entries) >= MAX_ENTRIES:
            self._entries.clear()
        self._entries[key] = (read_at + seconds, value)

    def clear(self) -> None:
        self._entries.clear()


@dataclass(frozen=True)
class KeyRow:
    """What authentication needs of an API key row: its digest, never the key."""

    pk: int
    tenant_id: int
    secret_hash: str
    principal: str
    is_tenant_admin: bool
    agent_id: int | None
    last_used_at: datetime | None
    # The key's own limits (agents.plans), over its tenant's.
    limits: dict[str, int] | None = None


@dataclass(frozen=True)
class IssuerRow:
    """What token validation needs of an issuer row (agents.identity)."""

    pk: int
    issuer: str
    # Where its key set is, if registered; else the discovery document says.
    jwks_uri: str
    discovery_url: str
    audiences: tuple[str, ...]
    algorithms: tuple[str, ...]
    user_claim: str
    # (operation, scopes it needs), for the operations that need any.
    scopes: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def of(cls, issuer: Issuer) -> IssuerRow:
        return cls(
            pk=issuer.pk,
            issuer=issuer.issuer,
            jwks_uri=issuer.jwks_uri,
            discovery_url=issuer.discovery_url,
            audiences=tuple(issuer.audiences),
            algorithms=tuple(issuer.algorithms),
            user_claim=issuer.user_claim or "sub",
            scopes=tuple(
                (operation, tuple(needed))
                for operation, needed in sorted((issuer.scopes or {}).items())
                if needed
            ),
        )


_agents: _Timed[tuple[str, str], Agent] = _Timed()
_keys: _Timed[str, KeyRow] = _Timed()
_agents_by_pk: _Timed[int, Agent] = _Timed()
# A custom domain -> the `(tenant, agent)` slugs of the active agent registered at it.
_domains: _Timed[str, tuple[str, str]] = _Timed()
# The operator's default plan (A2A_DEFAULT_PLAN) by name; (None,) when there is no such plan.
_default_plans: _Timed[str, tuple[Plan | None]] = _Timed()
# Whether a tenant has an agent with a cap of its own (tasks_app.lanes).
_agent_caps: _Timed[int, bool] = _Timed()
# A tenant's active token issuers, its own and the platform-wide ones (agents.identity).
_issuers: _Timed[int, tuple[IssuerRow, ...]] = _Timed()
# When this process last wrote (or claimed to write) each key's last_used_at: a cached row
# still shows the value it was read with.
_touched: dict[int, datetime] = {}
_touch_lock = threading.Lock()


def agent_cached(*, tenant_slug: str, agent_slug: str) -> Agent | None:
    """The active agent at this URL if a fresh entry holds it; no database access."""
    return _agents.get((tenant_slug, agent_slug))


def agent_load(*, tenant_slug: str, agent_slug: str) -> Agent:
    """Read the active agent (AgentNotFound if there is none) and keep it. Cached instances
    are shared by concurrent calls: read them, never change them."""
    read_at = clock()
    agent = agent_get_active(tenant_slug=tenant_slug, agent_slug=agent_slug)
    _limits_attach(agent)
    _agents.put((tenant_slug, agent_slug), agent, read_at)
    return agent


def _limits_attach(agent: Agent) -> None:
    """Work out the agent's tenant's limits as it is read (its plan came with it), so a call
    has them without another database hop: `tenant_limits`."""
    agent._tenant_limits = tenant_limits(agent.tenant)  # type: ignore[attr-defined]


def tenant_limits(tenant: Tenant) -> plans.Limits:
    """The tenant's limits: its plan, or the operator's default plan, with its overrides."""
    plan = tenant.plan
    if plan is None and (name := plans.default_plan_name()):
        entry = _default_plans.get(name)
        if entry is None:
            read_at = clock()
            entry = (Plan.objects.filter(name=name).first(),)
            _default_plans.put(name, entry, read_at)
        plan = entry[0]
    return plans.tenant_limits(tenant, plan)


def tenant_agent_caps(tenant_id: int) -> bool:
    """Whether any of the tenant's agents has a cap of its own on runs at once
    (`agent_running_runs` in its limits), from the cache when fresh."""
    found = _agent_caps.get(tenant_id)
    if found is None:
        read_at = clock()
        found = Agent.objects.filter(
            tenant_id=tenant_id, limits__has_key="agent_running_runs"
        ).exists()
        _agent_caps.put(tenant_id, found, read_at)
    return found


def call_limits(agent: Agent, key_limits: Iterable[tuple[str, int]] = ()) -> plans.Limits:
    """The limits of a call to `agent` with a key whose own limits are `key_limits`: the
    tenant's, worked out when the agent was read (`agent_load`, `agent_by_pk`), with the
    agent's and the key's own."""
    tenant_limits_ = getattr(agent, "_tenant_limits", None)
    if tenant_limits_ is None:  # an agent read elsewhere (sync callers only)
        tenant_limits_ = tenant_limits(agent.tenant)
    return plans.call_limits(tenant_limits_, agent, key_limits)


def agent_active(*, tenant_slug: str, agent_slug: str) -> Agent:
    """The active agent at this URL, from the cache when fresh (sync callers)."""
    return agent_cached(tenant_slug=tenant_slug, agent_slug=agent_slug) or agent_load(
        tenant_slug=tenant_slug, agent_slug=agent_slug
    )


def agent_by_pk(pk: int) -> Agent:
    """The agent with this id, with its tenant, active or not (what an agent run needs: a run
    already queued still runs), from the cache when fresh. Shared: read it, never change it."""
    agent = _agents_by_pk.get(pk)
    if agent is None:
        read_at = clock()
        agent = Agent.objects.select_related("tenant", "tenant__plan").get(pk=pk)
        _limits_attach(agent)
        _agents_by_pk.put(pk, agent, read_at)
    return agent


def domain_agent_cached(host: str) -> tuple[str, str] | None:
    """The `(tenant, agent)` at this custom domain if a fresh entry holds it; no database."""
    return _domains.get(host)


def domain_agent(host: str) -> tuple[str, str] | None:
    """The `(tenant, agent)` slugs of the active agent whose custom domain is `host`, from the
    cache when fresh; None when no active agent has it (not cached, as elsewhere)."""
    found = _domains.get(host)
    if found is None:
        read_at = clock()
        found = agent_path_at_domain(host)
        if found is not None:
            _domains.put(host, found, read_at)
    return found


def key_cached(prefix: str) -> KeyRow | None:
    return _keys.get(prefix)


def key_read(prefix: str) -> KeyRow | None:
    """The unrevoked key with this prefix, from the database (uncached)."""
    key = (
        ApiKey.objects.filter(prefix=prefix, revoked_at__isnull=True)
        .only(
            "id",
            "tenant_id",
            "secret_hash",
            "principal",
            "scopes",
            "agent_id",
            "last_used_at",
            "limits",
        )
        .first()
    )
    if key is None:
        return None
    return KeyRow(
        pk=key.pk,
        tenant_id=key.tenant_id,
        secret_hash=key.secret_hash,
        principal=key.principal,
        is_tenant_admin=key.is_tenant_admin,
        agent_id=key.agent_id,
        last_used_at=key.last_used_at,
        limits=key.limits or None,
    )


def key_load(prefix: str) -> KeyRow | None:
    """Read the key (None if there is no unrevoked key with this prefix) and keep it."""
    read_at = clock()
    key = key_read(prefix)
    if key is not None:
        _keys.put(prefix, key, read_at)
    return key


def issuers_cached(tenant_id: int) -> tuple[IssuerRow, ...] | None:
    return _issuers.get(tenant_id)


def issuers_load(tenant_id: int) -> tuple[IssuerRow, ...]:
    """Read the tenant's active issuers and keep them (none found is kept too: a bearer token
    at a tenant without issuers is refused without a query, and a new issuer is heard of
    within A2A_AUTH_CACHE_SECONDS)."""
    read_at = clock()
    rows = tuple(IssuerRow.of(issuer) for issuer in issuers_for(tenant_id=tenant_id))
    _issuers.put(tenant_id, rows, read_at)
    return rows


def key_touch_due(key: KeyRow, now: datetime, every_seconds: float) -> bool:
    """Whether this call should record the key's use: when neither the row nor this process's
    last write is younger than `every_seconds`. Claims the write, so concurrent calls in this
    process do not repeat it."""
    with _touch_lock:
        seen = [t for t in (key.last_used_at, _touched.get(key.pk)) if t is not None]
        if seen and (now - max(seen)).total_seconds() <= every_seconds:
            return False
        if len(_touched) >= MAX_ENTRIES:
            _touched.clear()
        _touched[key.pk] = now
        return True


def forget_all() -> None:
    """Empty every cache of this process (tests; a process that must see a change at once)."""
    _agents.clear()
    _keys.clear()
    _agents_by_pk.clear()
    _domains.clear()
    _default_plans.clear()
    _agent_caps.clear()
    _issuers.clear()
    with _touch_lock:
        _touched.clear()
