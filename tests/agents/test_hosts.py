"""Agent host names: the pattern read both ways, and the rules for custom domains."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from agents import hosts
from agents.cards import agent_card_json

pytestmark = pytest.mark.django_db

PATTERN = "{agent}--{tenant}.agents.example.com"


@pytest.fixture
def pattern(settings):
    settings.A2A_AGENT_HOST_PATTERN = PATTERN
    settings.A2A_AGENT_HOST_DOMAIN = ".agents.example.com"
    settings.A2A_PUBLIC_BASE_URL = "https://a2a.example.com"
    settings.A2A_GRPC_PUBLIC_ADDRESS = "grpc.example.com:443"


@pytest.mark.parametrize(
    "host, found",
    [
        ("echo--acme.agents.example.com", ("acme", "echo")),
        ("ECHO--acme.agents.example.com:8443", ("acme", "echo")),
        ("echo--acme.agents.example.com.", ("acme", "echo")),
        # Slugs may hold the separator: the shortest agent slug is taken.
        ("a--b--c.agents.example.com", ("b--c", "a")),
        ("echo.agents.example.com", None),
        ("echo--acme.other.example.com", None),
        ("a2a.example.com", None),
        ("127.0.0.1:8000", None),
        ("[::1]:8000", None),
        ("", None),
    ],
)
def test_a_host_names_its_agent_by_the_pattern(pattern, host, found):
    assert hosts.host_agent(host) == found


def test_an_agent_host_is_its_custom_domain_else_the_patterns(pattern, make_tenant, make_agent):
    agent = make_agent(make_tenant("acme"), "echo")
    assert hosts.agent_host(agent) == "echo--acme.agents.example.com"
    agent.custom_domain = "echo.acme.com"
    agent.save()
    assert hosts.agent_host(agent) == "echo.acme.com"
    assert hosts.host_agent("echo.acme.com:443") == ("acme", "echo")
    card = agent_card_json(agent, base_url="https://echo.acme.com/")
    addresses = {
        (i["protocolBinding"], i["protocolVersion"]): i["url"] for i in card["supportedInterfaces"]
    }
    assert addresses[("JSONRPC", "1.0")] == "https://echo.acme.com/"
    assert addresses[("GRPC", "1.0")] == "grpc.example.com:443"
    v03 = [
        i["url"]
        for i in card["supportedInterfaces"]
        if (i["protocolBinding"], i["protocolVersion"]) == ("GRPC", "0.3")
    ]
    assert v03 == ["echo.acme.com:443", "grpcs://echo.acme.com:443"]


@pytest.mark.parametrize(
    "domain, problem",
    [
        ("Echo.Acme.com", "lower-case host name"),
        ("https://echo.acme.com", "lower-case host name"),
        ("echo.acme.com:8443", "lower-case host name"),
        ("10.0.0.5", "lower-case host name"),
        ("a2a.example.com", "the platform's own host name"),
        ("x--y.agents.example.com", "under the platform's agent host names"),
        ("other.agents.example.com", "under the platform's agent host names"),
    ],
)
def test_a_custom_domain_is_checked(pattern, make_tenant, make_agent, domain, problem):
    agent = make_agent(make_tenant(), "echo")
    agent.custom_domain = domain
    with pytest.raises(ValidationError) as raised:
        agent.full_clean()
    assert problem in str(raised.value.message_dict["custom_domain"])


def test_a_custom_domain_belongs_to_one_agent(pattern, make_tenant, make_agent):
    first, second = (make_agent(make_tenant(), "echo") for _ in range(2))
    first.custom_domain = second.custom_domain = "echo.acme.com"
    first.full_clean()
    first.save()
    with pytest.raises(ValidationError, match="already has this custom domain"):
        second.full_clean()


def test_the_origin_serves_the_default_agents_card(client, settings, make_tenant, make_agent):
    """RFC 8615's well-known card at the platform's own origin: the default agent's, with its
    URLs under /a2a/; a strict v1.0 card when asked with `A2A-Version: 1.0`."""
    agent = make_agent(make_tenant("acme"), "helper")
    settings.A2A_DEFAULT_AGENT = "acme/helper"
    for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
        response = client.get(path)
        assert response.status_code == 200, response.content
        card = response.json()
        assert card["name"] == agent.name
        assert card["url"].endswith("/a2a/acme/helper/")
        assert response["Vary"] == "A2A-Version"
    strict = client.get("/.well-known/agent-card.json", headers={"A2A-Version": "1.0"}).json()
    assert "url" not in strict and strict["supportedInterfaces"][0]["url"].endswith(
        "/a2a/acme/helper/"
    )
    settings.A2A_DEFAULT_AGENT = ""
    missing = client.get("/.well-known/agent-card.json")
    assert missing.status_code == 404 and "no default agent" in missing.json()["message"]
