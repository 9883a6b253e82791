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
