"""OAuth 2.0 / OpenID Connect bearer tokens as callers of a tenant's agents (docs/identity.md).

A tenant (or the operator, platform-wide) registers issuers (`Issuer`); a JWT one of them
signed calls the tenant's agents as its user (the issuer's `user_claim`, `sub` by default), who
owns the tasks it creates and sees only those, as an API key's principal does.

A token is checked with PyJWT against the issuer's key set: the signature with a key of the set
(found by `kid`) in an algorithm the issuer was registered with (asymmetric only, so never
`none` and never an HMAC keyed with a public key), `exp` and `nbf` with A2A_TOKEN_LEEWAY_SECONDS
of skew, `iss`, and `aud` against the issuer's accepted audiences. The discovery document and
the key set are fetched through the SSRF guard (a2a_platform.ssrf.IDENTITY) and kept in the
process for A2A_JWKS_CACHE_SECONDS, so a call with a token makes no network round trip; a
`kid` the kept set lacks makes the process read the set again at once (a provider's key
rotation), at most once per A2A_JWKS_REFETCH_SECONDS per set. A set that cannot be read again
is used as last read (the provider being away does not lock every user out); with none read,
the call is answered IssuerUnavailable (503), not as a bad token.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit, urlunsplit

import httpx
import jwt
from django.conf import settings
from django.utils import timezone

from a2a_platform import ssrf
from a2a_platform.db import db

from . import cache, limits
from .errors import InsufficientScope, InvalidToken, IssuerUnavailable
from .models import SCOPE_OPERATIONS, TOKEN_ALGORITHMS, Agent, Issuer
from .selectors import issuers_for

__all__ = ["issuers_for", "protected_resource_metadata_url", "token_caller"]

# RFC 9728 §3: the metadata of a resource is at this well-known path, inserted between the
# resource's host and its path.
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"
# A JWS in compact form: three base64url parts (the signature may be empty: `alg: none`).
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
# Discovery documents and key sets larger than this are refused (real ones are a few KB).
MAX_DOCUMENT_BYTES = 256 * 1024
# An owner's user part longer than this is kept as its digest (Task.owner holds 220).
_USER_CHARS = 180


def protected_resource_metadata_url(resource: str) -> str:
    """Where the OAuth 2.0 Protected Resource Metadata of `resource` (an agent's URL) is
    served (RFC 9728 §3.1)."""
    parts = urlsplit(resource)
    path = parts.path if parts.path != "/" else ""
    return urlunsplit((parts.scheme, parts.netloc, PROTECTED_RESOURCE_WELL_KNOWN + path, "", ""))


def resource_metadata_of(agent: Agent) -> str:
    """The metadata URL of the agent at the platform's origin, as 401s point at it."""
    from .cards import agent_base_url

    return protected_resource_metadata_url(agent_base_url(agent))


def looks_like_token(credentials: str) -> bool:
    """Whether a bearer credential is a JWT (compact JWS) rather than an API key."""
    return _COMPACT_JWS.fullmatch(credentials) is not None


def owner_of(issuer: str, user: str) -> str:
    """The owner of the tasks a token's user creates: `user:<issuer tag>:<user>`. The tag is
    a digest of the issuer URL, so the same user of the same provider owns the same tasks
    whether the issuer is registered by the tenant or platform-wide, or registered again."""
    tag = hashlib.sha256(issuer.encode()).hexdigest()[:8]
    if len(user) > _USER_CHARS:
        user = "sha256-" + hashlib.sha256(user.encode()).hexdigest()
    return f"user:{tag}:{user}"


@dataclass(frozen=True)
class TokenCaller:
    """Who a valid token says calls: the owner of its tasks and what its scopes leave out."""

    owner: str
    # (operation, scopes it needs that the token lacks), for the operations it may not do.
    missing: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class _Verified:
    """A token this process verified: what it made, against which issuer row, and until when
    that may be used without verifying it again (cache.clock)."""

    caller: TokenCaller
    issuer: cache.IssuerRow
    until: float


# By (tenant, token): tokens verified lately. A client sends the same token for minutes, and
# verifying it (three base64 and JSON passes and a signature) cost a GetTask a third of its
# throughput, measured; a hit is a lookup. An entry is used only while its issuer row is still
# the tenant's as read now (a changed or deactivated issuer ends it within
# A2A_AUTH_CACHE_SECONDS), before the token's `exp` (time.time()), and for no longer than the
# key set it was verified with is kept (A2A_JWKS_CACHE_SECONDS: a key the provider withdrew
# stops working then, as it would without this cache).
_verified: dict[tuple[int, str], _Verified] = {}
VERIFIED_ENTRIES = 4096


async def token_caller(*, agent: Agent, token: str) -> TokenCaller:
    """The caller a bearer JWT makes at `agent`, or InvalidToken saying what is wrong with
    it, or IssuerUnavailable."""
    issuers = cache.issuers_cached(agent.tenant_id)
    if issuers is None:
        issuers = await db(cache.issuers_load)(agent.tenant_id)
    seen = _verified.get((agent.tenant_id, token))
    if seen is not None and cache.clock() < seen.until and seen.issuer in issuers:
        return seen.caller
    return await _token_verify(agent, token, issuers)


async def _token_verify(
    agent: Agent, token: str, issuers: tuple[cache.IssuerRow, ...]
) -> TokenCaller:
    def refused(why: str, message: str) -> InvalidToken:
        return InvalidToken(message, why=why, resource_metadata=resource_metadata_of(agent))

    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError:
        raise refused(
            "not a JWT", "The bearer token is neither an API key nor a well-formed JWT."
        ) from None
    alg = header.get("alg")
    if alg not in TOKEN_ALGORITHMS:
        raise refused(
            "algorithm not accepted",
            f"Tokens signed with alg {str(alg)[:20]!r} are not accepted (accepted: "
            f"{', '.join(TOKEN_ALGORITHMS)}).",
        )
    named = unverified.get("iss")
    issuer = next((i for i in issuers if i.issuer == named), None)
    if issuer is None:
        raise refused(
            "issuer not accepted",
            f"Tokens of issuer {str(named)[:200]!r} are not accepted by this agent's tenant."
            if isinstance(named, str)
            else "The token names no issuer ('iss').",
        )
    if alg not in issuer.algorithms:
        raise refused(
            "algorithm not accepted",
            f"This issuer's tokens are accepted signed with {', '.join(issuer.algorithms)}, "
            f"not {alg}.",
        )
    key = await signing_key(issuer, header.get("kid"), alg)
    if key is None:
        raise refused(
            "unknown signing key",
            f"The token's signing key (kid {str(header.get('kid'))[:80]!r}) is not in the "
            "issuer's key set.",
        )
    try:
        claims = jwt.decode(
            token,
            key=key,
            algorithms=[alg],
            audience=list(issuer.audiences),
            issuer=issuer.issuer,
            leeway=settings.A2A_TOKEN_LEEWAY_SECONDS,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise refused("expired", "The token has expired.") from None
    except jwt.ImmatureSignatureError:
        raise refused(
            "not yet valid", "The token is not valid yet (nbf or iat is in the future)."
        ) from None
    except jwt.InvalidAudienceError:
        raise refused(
            "audience not accepted",
            f"The token's audience is not accepted here (accepted: {', '.join(issuer.audiences)}).",
        ) from None
    except jwt.InvalidSignatureError:
        raise refused("bad signature", "The token's signature does not verify.") from None
    except jwt.MissingRequiredClaimError as exc:
        raise refused("claim missing", f"The token has no {exc.claim!r} claim.") from None
    except jwt.InvalidTokenError as exc:
        raise refused("invalid token", f"The token is not valid: {exc}.") from None
    user = claims.get(issuer.user_claim)
    if isinstance(user, int) and not isinstance(user, bool):
        user = str(user)
    if not isinstance(user, str) or not user.strip():
        raise refused("no user", f"The token has no {issuer.user_claim!r} claim naming its user.")
    granted = token_scopes(claims)
    caller = TokenCaller(
        owner=owner_of(issuer.issuer, user),
        missing=tuple(
            (operation, tuple(s for s in needed if s not in granted))
            for operation, needed in issuer.scopes
            if not granted.issuperset(needed)
        ),
    )
    _remember(agent.tenant_id, token, caller, issuer, expires=float(claims["exp"]))
    return caller


def _remember(
    tenant_id: int, token: str, caller: TokenCaller, issuer: cache.IssuerRow, expires: float
) -> None:
    now = cache.clock()
    # `exp` is wall-clock time; the cache runs on cache.clock (monotonic): carried across.
    until = min(now + settings.A2A_JWKS_CACHE_SECONDS, now + (expires - time.time()))
    if until <= now:
        return
    if len(_verified) >= VERIFIED_ENTRIES:
        _verified.clear()
    _verified[(tenant_id, token)] = _Verified(caller, issuer, until)


def token_scopes(claims: dict[str, Any]) -> frozenset[str]:
    """The scopes a token grants: RFC 8693's `scope` (space-separated), or the `scp` some
    providers send (a list, or a string)."""
    granted: set[str] = set()
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            granted.update(value.split())
        elif isinstance(value, list):
            granted.update(v for v in value if isinstance(v, str))
    return frozenset(granted)


def scope_check(
    *, agent: Agent, missing: tuple[tuple[str, tuple[str, ...]], ...], operation: str
) -> None:
    """InsufficientScope unless the caller's token has the scopes `operation` needs."""
    assert operation in SCOPE_OPERATIONS, operation
    for name, scopes in missing:
        if name == operation:
            raise InsufficientScope(
                f"The token lacks the scope{'s' if len(scopes) > 1 else ''} "
                f"{', '.join(scopes)} that {operation} operations need at this agent.",
                scopes=scopes,
                resource_metadata=resource_metadata_of(agent),
            )


# --- key sets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Kept:
    """A document this process read, and when (cache.clock); for a key set, the keys made
    of it so far, by (kid, alg)."""

    document: dict[str, Any]
    read_at: float
    keys: dict[tuple[object, str], jwt.PyJWK | None] = field(default_factory=dict, compare=False)


# By URL: discovery documents and key sets (as JSON).
_documents: dict[str, _Kept] = {}
# The fetches under way, by event loop and URL: concurrent calls share one.
_fetching: dict[tuple[Any, str], asyncio.Future[_Kept]] = {}


async def signing_key(issuer: cache.IssuerRow, kid: object, alg: str) -> jwt.PyJWK | None:
    """The key of the issuer's set with this `kid` (a token without one: the set's only key
    fit for `alg`), reading the set again when the kept one lacks it and was read more than
    A2A_JWKS_REFETCH_SECONDS ago."""
    jwks_uri = await _jwks_uri(issuer)
    kept = await _document(jwks_uri, max_age=settings.A2A_JWKS_CACHE_SECONDS)
    key = _key_of(kept, kid, alg)
    if key is None and cache.clock() - kept.read_at >= settings.A2A_JWKS_REFETCH_SECONDS:
        kept = await _document(jwks_uri, max_age=0)
        key = _key_of(kept, kid, alg)
    return key


def _key_of(kept: _Kept, kid: object, alg: str) -> jwt.PyJWK | None:
    which = (kid if isinstance(kid, str | None) else repr(kid), alg)
    if which not in kept.keys:
        if len(kept.keys) >= 64:  # made-up kids: each is looked for once per set read
            kept.keys.clear()
        kept.keys[which] = _key_in(kept.document, kid, alg)
    return kept.keys[which]


def _key_in(jwks: dict[str, Any], kid: object, alg: str) -> jwt.PyJWK | None:
    fit = []
    for data in jwks.get("keys") or ():
        if not isinstance(data, dict):
            continue
        if kid is not None and data.get("kid") != kid:
            continue
        key = key_for(data, alg)
        if key is not None:
            fit.append(key)
    return fit[0] if len(fit) == 1 else None


def key_for(data: dict[str, Any], alg: str) -> jwt.PyJWK | None:
    """The JWK `data` as a key that verifies `alg` signatures, or None: never a shared secret,
    only a key for signatures (`use` absent or `sig`) of this algorithm (`alg` absent or
    the same) and of its type."""
    if data.get("kty") == "oct":
        return None
    if data.get("use") not in (None, "sig") or data.get("alg") not in (None, alg):
        return None
    try:
        return jwt.PyJWK(data, algorithm=alg)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
        return None  # not a key of this algorithm's type


async def _jwks_uri(issuer: cache.IssuerRow) -> str:
    if issuer.jwks_uri:
        return issuer.jwks_uri
    kept = await _document(issuer.discovery_url, max_age=settings.A2A_JWKS_CACHE_SECONDS)
    jwks_uri = kept.document.get("jwks_uri")
    if not isinstance(jwks_uri, str) or not jwks_uri:
        raise IssuerUnavailable(
            f"The discovery document of issuer {issuer.issuer} ({issuer.discovery_url}) names "
            "no jwks_uri."
        )
    return jwks_uri


async def _document(url: str, *, max_age: float) -> _Kept:
    """The JSON document at `url` as kept, if read less than `max_age` seconds ago; else read
    now (once for concurrent calls). A failed read falls back on the kept copy, if any."""
    kept = _documents.get(url)
    if kept is not None and cache.clock() - kept.read_at < max_age:
        return kept
    try:
        return await _once(url, functools.partial(_read, url))
    except IssuerUnavailable:
        if kept is not None:
            return kept
        raise


async def _once(url: str, read: Callable[[], Awaitable[_Kept]]) -> _Kept:
    which = (asyncio.get_running_loop(), url)
    fetching = _fetching.get(which)
    if fetching is None:
        fetching = asyncio.ensure_future(read())
        _fetching[which] = fetching
        fetching.add_done_callback(lambda done: _fetch_done(which, done))
    return await asyncio.shield(fetching)


def _fetch_done(which: tuple[Any, str], done: asyncio.Future[_Kept]) -> None:
    if _fetching.get(which) is done:
        del _fetching[which]
    if not done.cancelled():
        done.exception()  # seen, also when every caller waiting for it went away


async def _read(url: str) -> _Kept:
    read_at = cache.clock()
    try:
        async with ssrf.guarded_async_client(policy=ssrf.IDENTITY) as client:
            response = await client.get(url, headers={"Accept": "application/json"})
    except ssrf.UnsafeUrl as exc:
        raise IssuerUnavailable(f"{url} may not be fetched: {exc.reason}") from None
    except httpx.HTTPError as exc:
        raise IssuerUnavailable(f"{url} could not be read: {type(exc).__name__}.") from None
    kept = _Kept(_document_in(url, response), read_at)
    if len(_documents) >= cache.MAX_ENTRIES:
        _documents.clear()
    _documents[url] = kept
    if url.endswith("/.well-known/openid-configuration"):
        await db(discovered_record)(discovery_url=url, document=kept.document)
    return kept


def _document_in(url: str, response: httpx.Response) -> dict[str, Any]:
    """The JSON object an answer from `url` carries, or IssuerUnavailable saying why not."""
    if response.is_redirect:
        raise IssuerUnavailable(
            f"{url} answered HTTP {response.status_code}, a redirect (to "
            f"{response.headers.get('Location', '')[:300]!r}); redirects are not followed."
        )
    if response.status_code != 200:
        raise IssuerUnavailable(f"{url} answered HTTP {response.status_code}.")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise IssuerUnavailable(f"{url} is larger than {MAX_DOCUMENT_BYTES} bytes.")
    try:
        document = json.loads(response.content)
    except (ValueError, RecursionError):
        raise IssuerUnavailable(f"{url} is not JSON.") from None
    if not isinstance(document, dict):
        raise IssuerUnavailable(f"{url} is not a JSON object.")
    return document


def document_read(client: httpx.Client, url: str) -> dict[str, Any]:
    """The JSON object at `url`, read now with `client` (a guarded one, ssrf.IDENTITY) and not
    kept, or IssuerUnavailable saying what failed, in more detail than a token's caller gets:
    this is for the people who register the issuer (agents.services.issuer_check)."""
    try:
        response = client.get(url, headers={"Accept": "application/json"})
    except ssrf.UnsafeUrl as exc:
        raise IssuerUnavailable(f"{url} may not be fetched: {exc.reason}") from None
    except httpx.HTTPError as exc:
        detail = str(exc).strip()[:300]
        raise IssuerUnavailable(
            f"{url} could not be read: {type(exc).__name__}{f' ({detail})' if detail else ''}."
        ) from None
    return _document_in(url, response)


def discovered_of(document: dict[str, Any]) -> dict[str, Any]:
    """What of a discovery document is kept on the issuer's row (DISCOVERED_FIELDS): strings
    (and lists of them) that a row can hold and a page can show; a provider's other values
    are left out."""
    found: dict[str, Any] = {}
    for name in DISCOVERED_FIELDS:
        value = document.get(name)
        if isinstance(value, list):
            kept = [v for v in value if _keepable(v)][:_DISCOVERED_ITEMS]
            if kept:
                found[name] = kept
        elif _keepable(value):
            found[name] = value
    return found


# Of a list in a discovery document (scopes_supported), the first this many are kept.
_DISCOVERED_ITEMS = 100


def _keepable(value: object) -> bool:
    # PostgreSQL keeps no U+0000 in JSON; URLs are bounded as the agents' are.
    return isinstance(value, str) and 0 < len(value) <= limits.URL and "\x00" not in value


# What of a discovery document is kept on the issuer's row (for its card and the console).
DISCOVERED_FIELDS = ("jwks_uri", "token_endpoint", "authorization_endpoint", "scopes_supported")


def discovered_record(*, discovery_url: str, document: dict[str, Any]) -> None:
    """Keep what the discovery document says on every issuer row it belongs to, where it
    changed (so a card can list the provider's OAuth 2.0 flows without fetching anything)."""
    issuer = discovery_url.removesuffix("/.well-known/openid-configuration")
    found = discovered_of(document)
    for row in Issuer.objects.filter(issuer__in=(issuer, issuer + "/")):
        if {k: v for k, v in row.discovered.items() if k != "read_at"} != found:
            row.discovered = {**found, "read_at": timezone.now().isoformat()}
            row.save(update_fields=["discovered", "updated_at"])


def forget_all() -> None:
    """Drop every kept discovery document, key set and verified token (tests)."""
    _documents.clear()
    _verified.clear()


# --- cards and resource metadata ---
# What a card (agents.cards) and the RFC 9728 metadata (agents.views) say of the issuers: read
# from the rows alone, never from the network (discovery fills `Issuer.discovered` elsewhere).

# What each operation of Issuer.scopes lets a token do, for the scopes' descriptions in cards.
SCOPE_PURPOSES = {
    "send": "send messages",
    "read": "read tasks",
    "cancel": "cancel tasks",
    "push": "manage push notification configs",
}


def issuers_advertised(*, tenant_id: int) -> list[Issuer]:
    """The issuers a card of the tenant's agents lists: `issuers_for`, one per `iss` value
    (the tenant's own registration of an issuer also registered platform-wide comes first, so
    it is the one described)."""
    seen: set[str] = set()
    advertised = []
    for issuer in issuers_for(tenant_id=tenant_id):
        if issuer.issuer not in seen:
            seen.add(issuer.issuer)
            advertised.append(issuer)
    return advertised


def issuers_changed_at(*, tenant_id: int) -> datetime | None:
    """When an issuer of the tenant or a platform-wide one, active or not, last changed: a
    deactivation changes the card as much as an edit does."""
    from django.db.models import Max, Q

    changed: datetime | None = Issuer.objects.filter(
        Q(tenant_id=tenant_id) | Q(tenant__isnull=True)
    ).aggregate(at=Max("updated_at"))["at"]
    return changed


def issuer_tag(issuer: Issuer) -> str:
    """A short, stable name of an issuer in a card (its security schemes' names): the host of
    its `iss` for people, and a digest of the whole `iss` so that two issuers at one host (a
    provider's realms) differ. It depends on the `iss` value alone, so it survives registering
    the issuer again and is the same in every environment that trusts it; a row's id would
    also tell readers how many issuers the platform holds."""
    host = re.sub(r"[^a-z0-9.-]+", "-", (urlsplit(issuer.issuer).hostname or "issuer").lower())
    return f"{host[:60]}-{hashlib.sha256(issuer.issuer.encode()).hexdigest()[:8]}"


def issuer_scopes(issuer: Issuer) -> list[str]:
    """Every scope the issuer's tokens need for some operation, each once, in the order of
    the operations (SCOPE_OPERATIONS) and then as configured."""
    scopes: list[str] = []
    for operation in SCOPE_OPERATIONS:
        for scope in issuer.required_scopes(operation):
            if scope not in scopes:
                scopes.append(scope)
    return scopes


def issuer_scope_purposes(issuer: Issuer) -> dict[str, str]:
    """Each of the issuer's scopes with a short description: what it is needed for."""

    purposes: dict[str, list[str]] = {}
    for operation in SCOPE_OPERATIONS:
        for scope in issuer.required_scopes(operation):
            words = purposes.setdefault(scope, [])
            if SCOPE_PURPOSES[operation] not in words:
                words.append(SCOPE_PURPOSES[operation])
    return {scope: f"Needed to {' and to '.join(words)}." for scope, words in purposes.items()}


def issuer_endpoint(issuer: Issuer, name: str) -> str | None:
    """An endpoint discovery recorded (`token_endpoint`, `authorization_endpoint`), if it is
    an absolute http(s) URL: `discovered` holds what a provider said, checked here before a
    card repeats it."""
    value = (issuer.discovered or {}).get(name)
    if not isinstance(value, str) or len(value) > 2000:
        return None
    parts = urlsplit(value)
    return value if parts.scheme in ("https", "http") and parts.netloc else None


class ProtectedResourceMetadata(TypedDict, total=False):
    """RFC 9728 §2; parameters with no value are left out (§3.2)."""

    resource: str
    authorization_servers: list[str]
    bearer_methods_supported: list[str]
    scopes_supported: list[str]
    resource_name: str
    resource_documentation: str
    jwks_uri: str
    resource_signing_alg_values_supported: list[str]


def protected_resource_metadata(
    *, resource: str, name: str, issuers: list[Issuer], jwks_uri: str, documentation: str = ""
) -> ProtectedResourceMetadata:
    """The OAuth 2.0 Protected Resource Metadata of an agent at `resource`: tokens of
    `issuers` in the Authorization header; the platform's signing keys for what it signs
    (cards, push notifications) at `jwks_uri`."""
    metadata: ProtectedResourceMetadata = {"resource": resource}
    if servers := list(dict.fromkeys(issuer.issuer for issuer in issuers)):
        metadata["authorization_servers"] = servers
    metadata["bearer_methods_supported"] = ["header"]
    scopes = list(dict.fromkeys(s for issuer in issuers for s in issuer_scopes(issuer)))
    if scopes:
        metadata["scopes_supported"] = scopes
    metadata["resource_name"] = name
    if documentation:
        metadata["resource_documentation"] = documentation
    metadata["jwks_uri"] = jwks_uri
    metadata["resource_signing_alg_values_supported"] = ["ES256"]
    return metadata
