"""Agent cards: one v1.0 AgentCard, served with the v0.3 fields merged in for 0.3 clients."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlsplit

from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    AuthorizationCodeOAuthFlow,
    ClientCredentialsOAuthFlow,
    HTTPAuthSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from django.conf import settings
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_platform.versions import V0_1, V0_3, V1_0

from .hosts import agent_host
from .identity import (
    issuer_endpoint,
    issuer_scope_purposes,
    issuer_scopes,
    issuer_tag,
    issuers_advertised,
)
from .models import Agent, Issuer

API_KEY_SCHEME = "apiKey"
BEARER_SCHEME = "bearer"
# The schemes of an issuer (agents.identity.issuer_tag names it): OpenID Connect, and the
# OAuth 2.0 flows its discovery document offers (v1.0's OAuthFlows holds one flow, so each
# flow is a scheme of its own).
OIDC_SCHEME = "oidc-{issuer}"
CLIENT_CREDENTIALS_SCHEME = "oauth2-client-{issuer}"
AUTHORIZATION_CODE_SCHEME = "oauth2-code-{issuer}"


def agent_base_url(agent: Agent) -> str:
    """The agent's URL under the platform's origin: `<public base>/a2a/<tenant>/<agent>/`."""
    return f"{settings.A2A_PUBLIC_BASE_URL}/a2a/{agent.tenant.slug}/{agent.slug}/"


def host_base_url(host: str) -> str:
    """The root URL of an agent host (`host` as the request named it, port included), in the
    platform's public scheme: TLS ends in front of the web processes, as for the main origin."""
    return f"{urlsplit(settings.A2A_PUBLIC_BASE_URL).scheme}://{host}/"


def grpc_agent_port(agent_id: int) -> int | None:
    """The sidecar's port for agent `agent_id` alone (A2A_GRPC_AGENT_PORTS: agent 1 at the
    range's first port), or None: no range, or the range ends before it. The web (for cards)
    and the sidecar (for its ports) work it out alike, with nothing to agree on; an id is never
    reused, so a port never names another agent than its card said."""
    ports = settings.A2A_GRPC_AGENT_PORTS
    if not ports or agent_id < 1:
        return None
    port = ports[0] + agent_id - 1
    return port if port <= ports[1] else None


def grpc_v03_address(agent: Agent) -> str:
    """The `host:port` a v0.3 GRPC interface advertises, one that names the agent (v0.3
    requests have no `tenant`): the agent's own sidecar port (A2A_GRPC_AGENT_PORTS) at the
    sidecar's public host; else the sidecar's port at the agent's own host name, for a front
    that passes the authority on (deploy/haproxy-grpc.cfg); else the sidecar's public address."""
    address = settings.A2A_GRPC_PUBLIC_ADDRESS
    public_host, _, public_port = address.rpartition(":")
    if (port := grpc_agent_port(agent.pk)) is not None:
        return f"{public_host}:{port}"
    host = agent_host(agent)
    return f"{host}:{public_port}" if host else address


def grpc_v03_url(address: str) -> str:
    """`address` as a URL, for v0.3 clients that read the interface as one (the 0.3 TCK: the
    scheme says TLS or not): TLS when the sidecar ends it itself or the platform is public over
    https (its front then ends TLS for gRPC too, as docs/production.md sets it up)."""
    tls = settings.A2A_GRPC_TLS_CERT_FILE or settings.A2A_PUBLIC_BASE_URL.startswith("https:")
    return f"{'grpcs' if tls else 'grpc'}://{address}"


def grpc_tenant(agent: Agent) -> str:
    """The agent's `tenant` value on the gRPC sidecar (and the path under /a2a/)."""
    return f"{agent.tenant.slug}/{agent.slug}"


def tenant_jwks_url(tenant_slug: str) -> str:
    """The tenant's JWK Set at the platform's origin: the keys that sign its cards and pushes."""
    return f"{settings.A2A_PUBLIC_BASE_URL}/a2a/{tenant_slug}/.well-known/jwks.json"


def agent_card_build(
    agent: Agent, *, extended: bool = False, base_url: str | None = None
) -> AgentCard:
    """The agent's card, unsigned (agents.card_signatures signs it); `base_url`: the root its
    HTTP interfaces advertise (an agent host's, when the card was fetched there), its URL
    under /a2a/ by default. It lists the tenant's issuers as read from the database, never
    fetching anything."""
    url = base_url or agent_base_url(agent)
    issuers = issuers_advertised(tenant_id=agent.tenant_id)
    card = AgentCard(
        name=agent.name,
        description=agent.description,
        version=agent.version,
        supported_interfaces=[
            # v1.0 first: v1.0 clients take the first interface they support.
            AgentInterface(url=address, protocol_binding=binding, protocol_version=version)
            for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
            for binding, address in (
                (TransportProtocol.JSONRPC.value, url),
                # A REST base URL has no trailing slash: clients append "/message:send".
                (TransportProtocol.HTTP_JSON.value, url.rstrip("/")),
            )
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=agent.push_notifications,
            extended_agent_card=True,
        ),
        default_input_modes=agent.default_input_modes or ["text/plain"],
        default_output_modes=agent.default_output_modes or ["text/plain"],
        security_schemes={
            API_KEY_SCHEME: SecurityScheme(
                api_key_security_scheme=APIKeySecurityScheme(
                    location="header", name="X-API-Key", description="A tenant API key."
                )
            ),
            BEARER_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="bearer",
                    description=(
                        "A tenant API key, or an access token of an issuer this card lists "
                        "(its openIdConnect and oauth2 schemes), as a bearer token."
                        if issuers
                        else "A tenant API key as a bearer token."
                    ),
                )
            ),
        },
    )
    requirements = [
        SecurityRequirement(schemes={API_KEY_SCHEME: _empty()}),
        SecurityRequirement(schemes={BEARER_SCHEME: _empty()}),
    ]
    for issuer in issuers:
        for name, scheme in issuer_security_schemes(issuer).items():
            card.security_schemes[name].CopyFrom(scheme)
            requirements.append(
                SecurityRequirement(schemes={name: StringList(list=issuer_scopes(issuer))})
            )
    if agent.is_public:
        # An empty requirement means "no credentials needed", as in OpenAPI.
        requirements.append(SecurityRequirement())
    card.security_requirements.extend(requirements)
    if settings.A2A_GRPC_PUBLIC_ADDRESS:
        # v1.0 clients copy `tenant` into each request and the sidecar routes on it; v0.3
        # requests carry no tenant, so their address names the agent (`grpc_v03_address`).
        card.supported_interfaces.extend(
            (
                AgentInterface(
                    url=settings.A2A_GRPC_PUBLIC_ADDRESS,
                    protocol_binding=TransportProtocol.GRPC.value,
                    protocol_version=PROTOCOL_VERSION_1_0,
                    tenant=grpc_tenant(agent),
                ),
                # The same v0.3 address twice: the a2a-sdk's clients take the first v0.3
                # GRPC interface and give its url to their channel factory (a `host:port`
                # target); the 0.3 TCK takes the last and reads it as a URL.
                AgentInterface(
                    url=grpc_v03_address(agent),
                    protocol_binding=TransportProtocol.GRPC.value,
                    protocol_version=PROTOCOL_VERSION_0_3,
                ),
                AgentInterface(
                    url=grpc_v03_url(grpc_v03_address(agent)),
                    protocol_binding=TransportProtocol.GRPC.value,
                    protocol_version=PROTOCOL_VERSION_0_3,
                ),
            )
        )
    if agent.documentation_url:
        card.documentation_url = agent.documentation_url
    if agent.icon_url:
        card.icon_url = agent.icon_url
    if agent.provider_organization:
        card.provider.CopyFrom(
            AgentProvider(organization=agent.provider_organization, url=agent.provider_url)
        )
    skills = list(agent.skills) + (list(agent.extended_skills) if extended else [])
    card.skills.extend(ParseDict(skill, AgentSkill()) for skill in skills)
    if not card.skills:
        card.skills.append(default_skill(agent))
    _interfaces_served(card, agent, url)
    return card


def _interfaces_served(card: AgentCard, agent: Agent, url: str) -> None:
    """Keep only the interfaces of the versions the agent serves (`Agent.protocol_versions`).
    v0.1 has no interface of its own in cards; an agent that serves nothing else lists its
    JSON-RPC URL as a 0.1 interface, so that its card is not without one (the field is
    required) and v0.1's agent/getCard has the URL to give (v1.0 clients pass it by, and the
    SDK's v0.3 view of a card takes only 0.3 ones)."""
    served = agent.versions
    kept = [i for i in card.supported_interfaces if i.protocol_version in served]
    if not kept and V0_1 in served:
        kept.append(
            AgentInterface(
                url=url, protocol_binding=TransportProtocol.JSONRPC.value, protocol_version=V0_1
            )
        )
    if len(kept) != len(card.supported_interfaces):
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(kept)


def default_skill(agent: Agent) -> AgentSkill:
    """The skill a card lists for an agent registered with none: a card's `skills` is
    REQUIRED (at least one), so clients that check cards, and the SDK, would otherwise take
    the card as not spec-compliant. It says only what the agent says of itself."""
    return AgentSkill(
        id=agent.slug,
        name=agent.name,
        description=agent.description,
        tags=[agent.executor_kind],
    )


def issuer_security_schemes(issuer: Issuer) -> dict[str, SecurityScheme]:
    """How a card says to get a token of `issuer`: its OpenID Connect discovery URL, and the
    OAuth 2.0 flows whose endpoints its discovery document gave (`Issuer.discovered`), each
    flow's scopes those the issuer's tokens need here. A flow's scopes are REQUIRED and may
    not be empty, so an issuer configured with no scopes has its OpenID Connect scheme alone
    (a client reads the endpoints from the discovery document)."""
    tag = issuer_tag(issuer)
    audiences = ", ".join(issuer.audiences or ())
    token = f"an access token issued by {issuer.issuer} for {audiences}, sent as a bearer token"
    schemes = {
        OIDC_SCHEME.format(issuer=tag): SecurityScheme(
            open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                open_id_connect_url=issuer.discovery_url,
                description=f"OpenID Connect: {token}.",
            )
        )
    }
    scopes = issuer_scope_purposes(issuer)
    token_url = issuer_endpoint(issuer, "token_endpoint")
    authorization_url = issuer_endpoint(issuer, "authorization_endpoint")
    if not scopes or not token_url:
        return schemes
    schemes[CLIENT_CREDENTIALS_SCHEME.format(issuer=tag)] = SecurityScheme(
        oauth2_security_scheme=OAuth2SecurityScheme(
            description=f"OAuth 2.0 client credentials: {token}.",
            flows=OAuthFlows(
                client_credentials=ClientCredentialsOAuthFlow(token_url=token_url, scopes=scopes)
            ),
        )
    )
    if authorization_url:
        schemes[AUTHORIZATION_CODE_SCHEME.format(issuer=tag)] = SecurityScheme(
            oauth2_security_scheme=OAuth2SecurityScheme(
                description=f"OAuth 2.0 authorization code, for a user: {token}.",
                flows=OAuthFlows(
                    authorization_code=AuthorizationCodeOAuthFlow(
                        authorization_url=authorization_url, token_url=token_url, scopes=scopes
                    )
                ),
            )
        )
    return schemes


def _empty() -> StringList:
    return StringList()


def agent_card_json(
    agent: Agent, *, extended: bool = False, base_url: str | None = None, strict: bool = False
) -> dict[str, Any]:
    """The card as served, without its signature (what the console shows; the views sign
    it, agents.card_signatures): v1.0 proto-JSON with v0.3's url/preferredTransport/... merged
    in; `strict`: the v1.0 card alone (what a request sending `A2A-Version: 1.0` gets). The
    versions the agent serves decide over the request (`card_strict`)."""
    card = agent_card_build(agent, extended=extended, base_url=base_url)
    return card_view(card, strict=card_strict(agent, asked_v10=strict))


def card_strict(agent: Agent, *, asked_v10: bool) -> bool:
    """Whether the agent's card is the v1.0 card alone: asked for (`A2A-Version: 1.0`) of an
    agent that serves 1.0, or of any agent that does not serve 0.3, whose card has no v0.3
    interface to merge in. An agent that serves 0.3 and not 1.0 merges them in whatever the
    request asked: a card in the v0.3 shape is the one its clients can follow."""
    served = agent.versions
    if V0_3 not in served:
        return True
    return asked_v10 and V1_0 in served


def card_view(card: AgentCard, *, strict: bool) -> dict[str, Any]:
    """The card as served: the v1.0 proto-JSON alone (`strict`), or with v0.3's
    url/preferredTransport/... merged in (card_strict says which an agent's request gets)."""
    return MessageToDict(card) if strict else agent_card_to_dict(card)


def card_digest(card: AgentCard) -> bytes:
    """What identifies a card's content, its signatures left out: the SHA-256 of its
    deterministic protobuf encoding. Cards with one digest have one JSON form in each view,
    and one RFC 8785 form to sign."""
    unsigned = AgentCard()
    unsigned.CopyFrom(card)
    del unsigned.signatures[:]
    return hashlib.sha256(unsigned.SerializeToString(deterministic=True)).digest()


def card_etag(card: AgentCard, *, strict: bool, kid: str) -> str:
    """A weak ETag of the card served in one view and signed by the key `kid`: its content
    without the signature, which ES256 makes differ at each signing (two processes serve the
    same card with different signature bytes, hence weak); the key, so that a rotation makes
    clients that revalidate fetch the card signed by the new key."""
    view = b"strict" if strict else b"merged"
    digest = hashlib.sha256(card_digest(card) + b"\0" + view + b"\0" + kid.encode())
    return 'W/"' + digest.hexdigest()[:32] + '"'
