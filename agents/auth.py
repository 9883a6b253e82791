"""Who is calling an agent: API keys, bearer tokens of a tenant's issuers (agents.identity),
anonymous callers, and the owner scope of their tasks."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from a2a_platform.db import db

from . import cache, identity
from .errors import AuthenticationRequired
from .models import Agent, ApiKey

KEY_PREFIX = "a2a"
ANONYMOUS_OWNER = "anonymous"
# A key's last_used_at is written at most this often, so hot keys don't turn every read into
# a write.
LAST_USED_EVERY_SECONDS = 60


@dataclass(frozen=True)
class Principal:
    """The caller of one request, as the services see it."""

    owner: str
    is_tenant_admin: bool = False
    is_anonymous: bool = False
    can_list: bool = True
    api_key_id: int | None = None
    # The key's own limits (agents.plans), as (name, value) pairs.
    key_limits: tuple[tuple[str, int], ...] = ()
    # A token's caller: per operation its scopes do not cover, the scopes it lacks
    # (agents.identity.scope_check).
    scopes_missing: tuple[tuple[str, tuple[str, ...]], ...] = ()


def hash_secret(secret: str) -> str:
    # Keys are 190-bit random strings, so a fast digest is enough; a slow KDF buys nothing.
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key_material() -> tuple[str, str]:
    """Return (prefix, full key). The full key is shown once and never stored."""
    prefix = secrets.token_hex(4)
    return prefix, f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"


def credentials_from_headers(headers: dict[str, str]) -> str | None:
    """The API key or token from `Authorization: Bearer <key or token>`, or the API key from
    `X-API-Key: <key>` (lower-case names)."""
    authorization = headers.get("authorization", "").strip()
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            raise AuthenticationRequired(
                "The Authorization header must be 'Bearer <api key or token>'.",
                why="malformed Authorization header",
            )
        return value.strip()
    api_key = headers.get("x-api-key", "").strip()
    return api_key or None


def authenticate(*, agent: Agent, raw_key: str | None, require_key: bool = False) -> Principal:
    """Resolve the caller of `agent`, reading the key's row now (uncached). Raises
    AuthenticationRequired (HTTP 401)."""
    prefix = key_prefix(raw_key)
    key = cache.key_read(prefix) if prefix else None
    principal = principal_for(agent=agent, raw_key=raw_key, key=key, require_key=require_key)
    if key is not None:
        now = timezone.now()
        if cache.key_touch_due(key, now, LAST_USED_EVERY_SECONDS):
            key_touch(key_pk=key.pk, now=now)
    return principal


async def caller_resolve(
    *, tenant_slug: str, agent_slug: str, raw_key: str | None
) -> tuple[Agent, Principal]:
    """The active agent at this URL and its caller, as the request paths need them: from this
    process's cache (agents.cache) when its entries are fresh, else read in one database hop.
    The secret is checked against the key's digest on every call. Raises AgentNotFound and
    AuthenticationRequired."""
    prefix = key_prefix(raw_key)
    agent = cache.agent_cached(tenant_slug=tenant_slug, agent_slug=agent_slug)
    if raw_key is not None and prefix is None and identity.looks_like_token(raw_key):
        if agent is None:
            agent, _ = await _caller_rows_once(tenant_slug, agent_slug, None, None)
        try:
            caller = await identity.token_caller(agent=agent, token=raw_key)
        except AuthenticationRequired as exc:
            raise exc.at(agent) from None
        return agent, token_principal(caller)
    key = cache.key_cached(prefix) if prefix else None
    if agent is None or (prefix and key is None):
        agent, key = await _caller_rows_once(tenant_slug, agent_slug, prefix, agent)
    try:
        principal = principal_for(agent=agent, raw_key=raw_key, key=key)
    except AuthenticationRequired as exc:
        raise exc.at(agent) from None
    if key is not None:
        now = timezone.now()
        if cache.key_touch_due(key, now, LAST_USED_EVERY_SECONDS):
            await db(key_touch)(key_pk=key.pk, now=now)
    return agent, principal


# The reads of caller rows under way in this process, by event loop, URL and key prefix, each
# with the cache clock's time before it started.
CallerRows = tuple[Agent, "cache.KeyRow | None"]
_reading: dict[tuple[Any, ...], tuple[float, asyncio.Future[CallerRows]]] = {}


async def _caller_rows_once(
    tenant_slug: str, agent_slug: str, prefix: str | None, agent: Agent | None
) -> CallerRows:
    """`_caller_rows` on a database thread, once for the calls that miss the cache together:
    when an entry expires, every request in flight for that agent and key would otherwise read
    the same rows (a dozen reads a second at 16 clients, measured, instead of one). A call
    joins a read only while what it will return may still be used (A2A_AUTH_CACHE_SECONDS
    from the read's start, as for a cached entry), so the cache's bound holds for it too."""
    which = (asyncio.get_running_loop(), tenant_slug, agent_slug, prefix, agent is None)
    now = cache.clock()
    started, reading = _reading.get(which, (0.0, None))
    if reading is None or now >= started + settings.A2A_AUTH_CACHE_SECONDS:
        reading = asyncio.ensure_future(db(_caller_rows)(tenant_slug, agent_slug, prefix, agent))
        _reading[which] = (now, reading)
        reading.add_done_callback(functools.partial(_read_done, which))
    # A caller that goes away does not cancel the read the others wait for.
    return await asyncio.shield(reading)


def _read_done(which: tuple[Any, ...], reading: asyncio.Future[Any]) -> None:
    if _reading.get(which, (0.0, None))[1] is reading:
        del _reading[which]
    if not reading.cancelled():
        reading.exception()  # seen, also when every caller waiting for it went away


def _caller_rows(
    tenant_slug: str, agent_slug: str, prefix: str | None, agent: Agent | None
) -> tuple[Agent, cache.KeyRow | None]:
    if agent is None:
        agent = cache.agent_load(tenant_slug=tenant_slug, agent_slug=agent_slug)
    return agent, cache.key_load(prefix) if prefix else None


def key_prefix(raw_key: str | None) -> str | None:
    """The public prefix of a key in this platform's format (`a2a_<prefix>_<secret>`)."""
    if raw_key is None:
        return None
    parts = raw_key.split("_")
    if len(parts) < 3 or parts[0] != KEY_PREFIX:
        return None
    return parts[1]


def token_principal(caller: identity.TokenCaller) -> Principal:
    return Principal(owner=caller.owner, scopes_missing=caller.missing)


def principal_for(
    *, agent: Agent, raw_key: str | None, key: cache.KeyRow | None, require_key: bool = False
) -> Principal:
    """The caller of `agent`, given the row of the key it sent (if any row has that key's
    prefix). No database access: the secret is compared with the row's digest here."""
    if raw_key is None:
        if require_key:
            raise AuthenticationRequired(
                "This operation requires an API key or a token.",
                why="no credentials",
                resource_metadata=identity.resource_metadata_of(agent),
            )
        if not agent.is_public:
            raise AuthenticationRequired(
                "This agent is private: send an API key as 'Authorization: Bearer <key>' "
                "or 'X-API-Key: <key>', or a token of one of its tenant's issuers as "
                "'Authorization: Bearer <token>'.",
                why="no credentials",
                resource_metadata=identity.resource_metadata_of(agent),
            )
        shared = agent.anonymous_scope == Agent.AnonymousScope.SHARED
        return Principal(owner=ANONYMOUS_OWNER, is_anonymous=True, can_list=shared)
    if (
        key is None
        or key.tenant_id != agent.tenant_id
        or (key.agent_id is not None and key.agent_id != agent.pk)
        or not hmac.compare_digest(key.secret_hash, hash_secret(raw_key))
    ):
        raise AuthenticationRequired(
            "The API key is not valid for this agent.",
            why="API key not valid",
            resource_metadata=identity.resource_metadata_of(agent),
        )
    return Principal(
        owner=f"key:{key.principal}",
        is_tenant_admin=key.is_tenant_admin,
        api_key_id=key.pk,
        key_limits=tuple(sorted((key.limits or {}).items())),
    )


def key_touch(*, key_pk: int, now: datetime) -> None:
    ApiKey.objects.filter(pk=key_pk).update(last_used_at=now)
