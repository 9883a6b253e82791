"""The public agent card (signed), the agent's OAuth 2.0 Protected Resource Metadata and the
signing JWKS, with HTTP caching headers."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.http import http_date, parse_http_date_safe
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET
from packaging.version import InvalidVersion, Version

from .card_signatures import agent_card_sign
from .cards import (
    agent_base_url,
    agent_card_build,
    card_etag,
    card_strict,
    card_view,
    host_base_url,
    tenant_jwks_url,
)
from .errors import AgentNotFound
from .identity import issuers_advertised, issuers_changed_at, protected_resource_metadata
from .models import Tenant
from .selectors import agent_get_active, jwks_for, tenant_get_active
from .services import signing_key_active

CARD_MAX_AGE_SECONDS = 300
# The protected resource metadata changes with the tenant's issuers, as the card does.
METADATA_MAX_AGE_SECONDS = CARD_MAX_AGE_SECONDS
# A rotated key signs at once, so receivers refetch the set on an unknown kid (PyJWKClient
# does) rather than trusting a cached copy for this long.
JWKS_MAX_AGE_SECONDS = 300


# What the web's host router (a2a_platform.asgi) puts in a request's ASGI scope when the request
# came to an agent's own host name: that host, as the request named it.
AGENT_HOST_SCOPE_KEY = "a2a.agent_host"


# The card and metadata views are CSRF-exempt: a POST is told 405 (GET only) rather than
# refused for want of a CSRF token; they read no session and change nothing.
@csrf_exempt
@require_GET
def agent_card(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    """The agent's card, signed with its tenant's active key (agents.card_signatures). Fetched
    at the agent's own host, it advertises that host's URLs. With `A2A-Version: 1.0` it is the
    v1.0 card alone; otherwise the v1.0 card with the v0.3 fields merged in, which clients of
    both versions read. The versions the agent serves come first (cards.card_strict): one that
    does not serve 0.3 always has the v1.0 card alone, one that serves 0.3 and not 1.0 always
    the merged one; either lists only its versions' interfaces.

    A request that revalidates (If-None-Match, If-Modified-Since) an unchanged card is
    answered 304 before anything is signed or rendered."""
    try:
        agent = agent_get_active(tenant_slug=tenant_slug, agent_slug=agent_slug)
    except AgentNotFound as exc:
        return _agent_not_found(exc)
    host = _agent_host(request)
    card = agent_card_build(agent, base_url=host_base_url(host) if host else None)
    strict = card_strict(agent, asked_v10=_asks_v10(request.headers.get("A2A-Version")))
    signing_key = signing_key_active(tenant=agent.tenant)
    etag = card_etag(card, strict=strict, kid=signing_key.kid)
    # What the card says changes with the agent, the tenant's issuers, and the key signing it.
    changed = [agent.updated_at, signing_key.created_at]
    if (issuers_changed := issuers_changed_at(tenant_id=agent.tenant_id)) is not None:
        changed.append(issuers_changed)
    last_modified = int(max(changed).timestamp())
    headers = {
        "ETag": etag,
        "Last-Modified": http_date(last_modified),
        "Cache-Control": f"public, max-age={CARD_MAX_AGE_SECONDS}",
        "Access-Control-Allow-Origin": "*",
        # The card differs by the version asked for: caches keep one per value.
        "Vary": "A2A-Version",
    }
    if _not_modified(request, etag, last_modified):
        response = HttpResponse(status=304)
    else:
        response = JsonResponse(
            card_view(agent_card_sign(agent, card, signing_key=signing_key), strict=strict)
        )
    for name, value in headers.items():
        response[name] = value
    return response


def _not_modified(request: HttpRequest, etag: str, last_modified: int) -> bool:
    """RFC 9110 §13.1: If-None-Match, compared weakly, and only without it If-Modified-Since."""
    if_none_match = request.headers.get("If-None-Match")
    if if_none_match:
        tags = [tag.strip().removeprefix("W/") for tag in if_none_match.split(",")]
        return "*" in tags or etag.removeprefix("W/") in tags
    if_modified_since = parse_http_date_safe(request.headers.get("If-Modified-Since", ""))
    return if_modified_since is not None and last_modified <= if_modified_since


def _agent_not_found(exc: AgentNotFound) -> JsonResponse:
    return JsonResponse({"error": "agent_not_found", "message": exc.message}, status=404)


def _agent_host(request: HttpRequest) -> str | None:
    """The agent host the request came to (a2a_platform.asgi), if it came to one."""
    host: str | None = getattr(request, "scope", {}).get(AGENT_HOST_SCOPE_KEY)
    return host


@csrf_exempt
@require_GET
def protected_resource_metadata_view(
    request: HttpRequest, tenant_slug: str, agent_slug: str
) -> HttpResponse:
    """The agent's OAuth 2.0 Protected Resource Metadata (RFC 9728): which authorization
    servers (the tenant's issuers and the platform-wide ones) issue tokens for it, and with
    which scopes. Public, as the card is, for any agent: it is how a client finds out how to
    authenticate.

    Served at `/.well-known/oauth-protected-resource/a2a/<tenant>/<agent>/` on the platform's
    origin (RFC 9728 §3.1, agents.identity.protected_resource_metadata_url) and at
    `/.well-known/oauth-protected-resource` on the agent's own host. Its `resource` is the
    URL that metadata URL was made from, as §3.3 has clients check: the agent's JSON-RPC URL
    (the card's), or, asked for without the trailing slash, its REST URL."""
    try:
        agent = agent_get_active(tenant_slug=tenant_slug, agent_slug=agent_slug)
    except AgentNotFound as exc:
        return _agent_not_found(exc)
    host = _agent_host(request)
    resource = host_base_url(host) if host else agent_base_url(agent)
    if not host and not request.path.endswith("/"):
        resource = resource.rstrip("/")
    response = JsonResponse(
        protected_resource_metadata(
            resource=resource,
            name=agent.name,
            issuers=issuers_advertised(tenant_id=agent.tenant_id),
            jwks_uri=tenant_jwks_url(agent.tenant.slug),
            documentation=agent.documentation_url,
        )
    )
    response["Cache-Control"] = f"public, max-age={METADATA_MAX_AGE_SECONDS}"
    response["Access-Control-Allow-Origin"] = "*"
    return response


@csrf_exempt
@require_GET
def origin_agent_card(request: HttpRequest) -> HttpResponse:
    """The card at the platform's own origin (RFC 8615's well-known location): the default
    agent's (A2A_DEFAULT_AGENT), for clients that look only there."""
    if not settings.A2A_DEFAULT_AGENT:
        return JsonResponse(
            {
                "error": "agent_not_found",
                "message": "This platform has no default agent, so its origin serves no agent "
                "card; each agent's card is at /a2a/<tenant>/<agent>/.well-known/agent-card.json.",
            },
            status=404,
        )
    tenant_slug, _, agent_slug = settings.A2A_DEFAULT_AGENT.partition("/")
    return agent_card(request, tenant_slug=tenant_slug, agent_slug=agent_slug)


def _asks_v10(version: str | None) -> bool:
    try:
        return Version((version or "").strip()).major == 1
    except InvalidVersion:
        return False


def _jwks_response(jwks: dict[str, object]) -> JsonResponse:
    response = JsonResponse(jwks)
    response["Cache-Control"] = f"public, max-age={JWKS_MAX_AGE_SECONDS}"
    response["Access-Control-Allow-Origin"] = "*"
    return response


@require_GET
def jwks(request: HttpRequest) -> HttpResponse:
    """Every active tenant's published signing keys (pushes and cards)."""
    return _jwks_response(dict(jwks_for()))


@require_GET
def tenant_jwks(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    """One tenant's published signing keys (pushes and cards): the set receivers should pin,
    and the `jku` of its cards' signatures."""
    try:
        tenant = tenant_get_active(tenant_slug=tenant_slug)
    except Tenant.DoesNotExist:
        return JsonResponse(
            {"error": "tenant_not_found", "message": f"No tenant {tenant_slug!r} is hosted here."},
            status=404,
        )
    return _jwks_response(dict(jwks_for(tenant=tenant)))
