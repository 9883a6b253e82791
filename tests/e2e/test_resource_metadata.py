"""OAuth 2.0 Protected Resource Metadata (RFC 9728) of each agent, over real HTTP through the
ASGI app's routers: at the well-known path before the agent's path on the platform's origin,
and at the well-known path alone on the agent's own host."""

from __future__ import annotations

import httpx
import pytest

from agents.identity import protected_resource_metadata_url
from agents.models import Issuer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CARD = ".well-known/agent-card.json"
WELL_KNOWN = "/.well-known/oauth-protected-resource"


def make_issuer(tenant, issuer, **fields):
    fields.setdefault("audiences", ["https://agents.example.com/"])
    return Issuer.objects.create(tenant=tenant, name="IdP", issuer=issuer, **fields)


@pytest.fixture
def agent(make_tenant, make_agent):
    """A private agent of a tenant with an issuer, beside a platform-wide issuer, another
    tenant's and an inactive one."""
    tenant = make_tenant()
    agent = make_agent(tenant, "echo", documentation_url="https://docs.example/echo")
    make_issuer(None, "https://id.platform.example/", scopes={"read": ["platform.read"]})
    make_issuer(
        tenant, "https://login.acme.example", scopes={"send": ["a2a.send"], "read": ["a2a.read"]}
    )
    make_issuer(make_tenant(), "https://login.globex.example", scopes={"send": ["globex"]})
    make_issuer(tenant, "https://old.acme.example", is_active=False, scopes={"send": ["old"]})
    return agent


def json_rpc_url(card):
    return next(
        i["url"]
        for i in card["supportedInterfaces"]
        if (i["protocolBinding"], i["protocolVersion"]) == ("JSONRPC", "1.0")
    )


def test_the_metadata_of_the_cards_url_says_who_issues_tokens_for_it(http, live_platform, agent):
    # given: the URL a client makes from the card's JSON-RPC URL (RFC 9728 §3.1)
    card = http.get(live_platform.agent_url(agent) + CARD).json()
    resource = json_rpc_url(card)
    url = protected_resource_metadata_url(resource)
    assert url == f"{live_platform.url}{WELL_KNOWN}/a2a/{agent.tenant.slug}/echo/"
    # when: asked without credentials, of a private agent
    response = http.get(url)
    # then
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.headers["Cache-Control"] == "public, max-age=300"
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    metadata = response.json()
    assert metadata == {
        "resource": resource,  # §3.3: the very URL the metadata URL was made from
        "authorization_servers": ["https://login.acme.example", "https://id.platform.example/"],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["a2a.send", "a2a.read", "platform.read"],
        "resource_name": agent.name,
        "resource_documentation": "https://docs.example/echo",
        "jwks_uri": f"{live_platform.url}/a2a/{agent.tenant.slug}/.well-known/jwks.json",
        "resource_signing_alg_values_supported": ["ES256"],
    }
    jwks = http.get(metadata["jwks_uri"])
    assert jwks.status_code == 200 and "keys" in jwks.json()


def test_without_the_slash_it_is_the_metadata_of_the_rest_url(http, live_platform, agent):
    card = http.get(live_platform.agent_url(agent) + CARD).json()
    rest = next(
        i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "HTTP+JSON"
    )
    url = protected_resource_metadata_url(rest)
    assert not url.endswith("/")
    response = http.get(url, follow_redirects=False)
    assert response.status_code == 200, response.text
    assert response.json()["resource"] == rest


def test_at_the_agents_host_it_is_at_the_well_known_path_alone(live_platform, agent):
    port = live_platform.url.rpartition(":")[2]
    host = f"{agent.slug}--{agent.tenant.slug}.localhost:{port}"
    card = httpx.get(f"{live_platform.url}/{CARD}", headers={"Host": host}).json()
    resource = json_rpc_url(card)
    assert resource == f"http://{host}/"
    assert protected_resource_metadata_url(resource) == f"http://{host}{WELL_KNOWN}"
    response = httpx.get(f"{live_platform.url}{WELL_KNOWN}", headers={"Host": host})
    assert response.status_code == 200, response.text
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    metadata = response.json()
    assert metadata["resource"] == resource
    assert metadata["authorization_servers"] == [
        "https://login.acme.example",
        "https://id.platform.example/",
    ]


def test_an_agent_without_issuers_names_no_authorization_server(
    http, live_platform, make_tenant, make_agent
):
    agent = make_agent(make_tenant(), "plain")
    response = http.get(protected_resource_metadata_url(live_platform.agent_url(agent)))
    assert response.status_code == 200, response.text
    # RFC 9728 §3.2: parameters with zero values are omitted.
    assert response.json() == {
        "resource": live_platform.agent_url(agent),
        "bearer_methods_supported": ["header"],
        "resource_name": agent.name,
        "jwks_uri": f"{live_platform.url}/a2a/{agent.tenant.slug}/.well-known/jwks.json",
        "resource_signing_alg_values_supported": ["ES256"],
    }


def test_unknown_or_inactive_agents_are_404_json(http, live_platform, agent):
    slug = agent.tenant.slug
    port = live_platform.url.rpartition(":")[2]
    for response in (
        http.get(f"{live_platform.url}{WELL_KNOWN}/a2a/{slug}/nobody/"),
        http.get(f"{live_platform.url}{WELL_KNOWN}/a2a/nobody/echo"),
        httpx.get(
            f"{live_platform.url}{WELL_KNOWN}", headers={"Host": f"nobody--{slug}.localhost:{port}"}
        ),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"] == "agent_not_found"
    agent.is_active = False
    agent.save()
    response = http.get(protected_resource_metadata_url(live_platform.agent_url(agent)))
    assert response.status_code == 404 and response.json()["error"] == "agent_not_found"


def test_only_get_is_answered(http, live_platform, agent):
    url = protected_resource_metadata_url(live_platform.agent_url(agent))
    response = http.post(url, json={})
    assert response.status_code == 405 and response.headers["Allow"] == "GET"
