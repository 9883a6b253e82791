"""OAuth 2.0 / OpenID Connect bearer tokens as callers of a tenant's agents (docs/identity.md).

A tenant (or the operator, platform-wide) registers issuers (`Issuer`); a token one of them
signed calls the tenant's agents as its user, who owns the tasks it creates.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from .models import Issuer

# RFC 9728 §3: the metadata of a resource is at this well-known path, inserted between the
# resource's host and its path.
PROTECTED_RESOURCE_WELL_KNOWN = "/.well-known/oauth-protected-resource"


def protected_resource_metadata_url(resource: str) -> str:
    """Where the OAuth 2.0 Protected Resource Metadata of `resource` (an agent's URL) is
    served (RFC 9728 §3.1)."""
    parts = urlsplit(resource)
    path = parts.path if parts.path != "/" else ""
    return urlunsplit((parts.scheme, parts.netloc, PROTECTED_RESOURCE_WELL_KNOWN + path, "", ""))


def issuers_for(*, tenant_id: int) -> list[Issuer]:
    """The active issuers whose tokens call the tenant's agents: its own, then the
    platform-wide ones, oldest first."""
    from django.db.models import Q

    return list(
        Issuer.objects.filter(Q(tenant_id=tenant_id) | Q(tenant__isnull=True), is_active=True)
        .order_by("tenant_id", "created_at", "pk")
    )


# --- cards and resource metadata ---
# What a card (agents.cards) and the RFC 9728 metadata (agents.views) say of the issuers: read
# from the rows alone, never from the network (discovery fills `Issuer.discovered` elsewhere).
# (Imported here or in the functions, not at the top: this block is appended to the module as
# one piece.)

from datetime import datetime  # noqa: E402
from typing import TypedDict  # noqa: E402

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
    import hashlib
    import re

    host = re.sub(r"[^a-z0-9.-]+", "-", (urlsplit(issuer.issuer).hostname or "issuer").lower())
    return f"{host[:60]}-{hashlib.sha256(issuer.issuer.encode()).hexdigest()[:8]}"


def issuer_scopes(issuer: Issuer) -> list[str]:
    """Every scope the issuer's tokens need for some operation, each once, in the order of
    the operations (SCOPE_OPERATIONS) and then as configured."""
    from .models import SCOPE_OPERATIONS

    scopes: list[str] = []
    for operation in SCOPE_OPERATIONS:
        for scope in issuer.required_scopes(operation):
            if scope not in scopes:
                scopes.append(scope)
    return scopes


def issuer_scope_purposes(issuer: Issuer) -> dict[str, str]:
    """Each of the issuer's scopes with a short description: what it is needed for."""
    from .models import SCOPE_OPERATIONS

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
