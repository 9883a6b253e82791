"""The v0.3 gRPC address a card gives: the agent's own sidecar port when A2A_GRPC_AGENT_PORTS
holds it, else the sidecar's port at the agent's own host name, else the sidecar's address;
each written twice, as a `host:port` target and as a URL."""

from __future__ import annotations

import pytest

from agents.cards import agent_card_json, grpc_agent_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_make_run(settings):
    settings.A2A_PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    settings.A2A_GRPC_PUBLIC_ADDRESS = "127.0.0.1:50051"
    settings.A2A_AGENT_HOST_PATTERN = "{agent}--{tenant}.localhost"
    settings.A2A_GRPC_AGENT_PORTS = None
    return settings


def _v03(agent) -> list[str]:
    return [
        i["url"]
        for i in agent_card_json(agent)["supportedInterfaces"]
        if (i["protocolBinding"], i["protocolVersion"]) == ("GRPC", "0.3")
    ]


def test_agent_n_is_at_the_ranges_first_port_plus_n_minus_1(settings):
    settings.A2A_GRPC_AGENT_PORTS = (50052, 50054)
    assert [grpc_agent_port(n) for n in (1, 2, 3, 4)] == [50052, 50053, 50054, None]
    settings.A2A_GRPC_AGENT_PORTS = None
    assert grpc_agent_port(1) is None


def test_with_the_range_the_address_is_the_agents_port_at_the_public_host(
    as_make_run, make_tenant, make_agent
):
    agent = make_agent(make_tenant(), "echo")
    as_make_run.A2A_GRPC_AGENT_PORTS = (50100 - agent.pk + 1, 50100)
    assert _v03(agent) == ["127.0.0.1:50100", "grpc://127.0.0.1:50100"]
    # the v1.0 interface is the shared port, with the agent's tenant
    card = agent_card_json(agent)
    assert [i["url"] for i in card["supportedInterfaces"] if i.get("tenant")] == ["127.0.0.1:50051"]


def test_past_the_range_or_without_it_the_address_names_the_agents_host(
    as_make_run, make_tenant, make_agent
):
    agent = make_agent(make_tenant(), "echo")
    host = f"echo--{agent.tenant.slug}.localhost:50051"
    assert _v03(agent) == [host, f"grpc://{host}"]
    as_make_run.A2A_GRPC_AGENT_PORTS = (50052, 50052 + agent.pk - 2)  # one port short
    assert _v03(agent) == [host, f"grpc://{host}"]
    as_make_run.A2A_AGENT_HOST_PATTERN = ""
    assert _v03(agent) == ["127.0.0.1:50051", "grpc://127.0.0.1:50051"]


def test_the_url_says_tls_when_the_sidecar_or_the_public_origin_has_it(
    as_make_run, make_tenant, make_agent
):
    agent = make_agent(make_tenant(), "echo")
    as_make_run.A2A_AGENT_HOST_PATTERN = ""
    as_make_run.A2A_PUBLIC_BASE_URL = "https://a2a.example.com"
    assert _v03(agent)[1] == "grpcs://127.0.0.1:50051"
    as_make_run.A2A_PUBLIC_BASE_URL = "http://127.0.0.1:8000"
    as_make_run.A2A_GRPC_TLS_CERT_FILE = "/etc/ssl/sidecar.pem"
    assert _v03(agent)[1] == "grpcs://127.0.0.1:50051"
