"""How a card says to authenticate: the API key schemes, and for each token issuer the tenant's
agents trust an OpenID Connect scheme and the OAuth 2.0 flows its discovery document gave."""

from __future__ import annotations

import copy
import socket

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as v03_types
from google.protobuf.json_format import MessageToDict

from agents.cards import agent_card_build, agent_card_json
from agents.identity import issuer_tag
from agents.models import Issuer
from bindings.codecs.v01 import v01_card_json

ISS = "https://login.example.com/realms/staff"
DISCOVERED = {
    "token_endpoint": f"{ISS}/protocol/openid-connect/token",
    "authorization_endpoint": f"{ISS}/protocol/openid-connect/auth",
    "jwks_uri": f"{ISS}/protocol/openid-connect/certs",
}
SCOPES = {"send": ["a2a.send"], "read": ["a2a.read"], "cancel": ["a2a.send"]}


def make_issuer(tenant=None, issuer=ISS, **fields):
    fields.setdefault("audiences", ["https://agents.example.com/"])
    fields.setdefault("scopes", SCOPES)
    fields.setdefault("discovered", DISCOVERED)
    return Issuer.objects.create(tenant=tenant, name="Staff", issuer=issuer, **fields)


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "helper")


def test_without_issuers_the_card_names_the_api_key_schemes_only(agent):
    card = agent_card_json(agent, strict=True)
    assert set(card["securitySchemes"]) == {"apiKey", "bearer"}
    bearer = card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]
    assert bearer["description"] == "A tenant API key as a bearer token."


def test_an_issuer_gets_an_openid_connect_scheme_and_its_oauth2_flows(agent):
    # given
    make_issuer(agent.tenant)
    tag = issuer_tag(Issuer.objects.get())
    # when
    card = agent_card_json(agent, strict=True)
    # then
    schemes = card["securitySchemes"]
    assert set(schemes) == {
        "apiKey",
        "bearer",
        f"oidc-{tag}",
        f"oauth2-client-{tag}",
        f"oauth2-code-{tag}",
    }
    assert tag.startswith("login.example.com-") and len(tag) == len("login.example.com-") + 8
    oidc = schemes[f"oidc-{tag}"]["openIdConnectSecurityScheme"]
    assert oidc["openIdConnectUrl"] == f"{ISS}/.well-known/openid-configuration"
    assert ISS in oidc["description"] and "https://agents.example.com/" in oidc["description"]
    scopes = {
        "a2a.send": "Needed to send messages and to cancel tasks.",
        "a2a.read": "Needed to read tasks.",
    }
    client = schemes[f"oauth2-client-{tag}"]["oauth2SecurityScheme"]["flows"]
    assert client == {
        "clientCredentials": {"tokenUrl": DISCOVERED["token_endpoint"], "scopes": scopes}
    }
    code = schemes[f"oauth2-code-{tag}"]["oauth2SecurityScheme"]["flows"]
    assert code == {
        "authorizationCode": {
            "authorizationUrl": DISCOVERED["authorization_endpoint"],
            "tokenUrl": DISCOVERED["token_endpoint"],
            "scopes": scopes,
        }
    }
    # Each scheme is an alternative, with every scope some operation needs (the union).
    assert card["securityRequirements"] == [
        {"schemes": {"apiKey": {}}},
        {"schemes": {"bearer": {}}},
        *(
            {"schemes": {name: {"list": ["a2a.send", "a2a.read"]}}}
            for name in (f"oidc-{tag}", f"oauth2-client-{tag}", f"oauth2-code-{tag}")
        ),
    ]
    bearer = schemes["bearer"]["httpAuthSecurityScheme"]["description"]
    assert "API key" in bearer and "access token" in bearer


def test_the_v03_view_renders_the_issuer_schemes_validly(agent, make_agent):
    make_issuer(agent.tenant)
    public = make_agent(agent.tenant, "open", visibility="public")
    for each in (agent, public):
        merged = agent_card_json(each)
        tag = issuer_tag(Issuer.objects.get())
        # A v0.3 client reads the card with the v0.3 model: the schemes in their v0.3 shapes.
        v03 = v03_types.AgentCard.model_validate(copy.deepcopy(merged))
        kinds = {name: type(s.root).__name__ for name, s in v03.security_schemes.items()}
        assert kinds == {
            "apiKey": "APIKeySecurityScheme",
            "bearer": "HTTPAuthSecurityScheme",
            f"oidc-{tag}": "OpenIdConnectSecurityScheme",
            f"oauth2-client-{tag}": "OAuth2SecurityScheme",
            f"oauth2-code-{tag}": "OAuth2SecurityScheme",
        }
        assert merged["securitySchemes"][f"oidc-{tag}"]["type"] == "openIdConnect"
        assert merged["securitySchemes"][f"oauth2-code-{tag}"]["flows"]["authorizationCode"][
            "scopes"
        ] == {
            "a2a.send": "Needed to send messages and to cancel tasks.",
            "a2a.read": "Needed to read tasks.",
        }
        assert {f"oidc-{tag}": ["a2a.send", "a2a.read"]} in merged["security"]
        assert ({} in merged["security"]) is each.is_public
        # A v1.0 client (the SDK's resolver) reads back the very card that was built.
        assert parse_agent_card(copy.deepcopy(merged)) == agent_card_build(each)


def test_platform_wide_issuers_are_on_every_tenants_card_and_a_tenants_on_its_own_only(
    agent, make_tenant, make_agent
):
    # given
    other = make_agent(make_tenant(), "other")
    make_issuer(None, "https://id.platform.example/")
    make_issuer(agent.tenant, "https://login.acme.example/")
    make_issuer(other.tenant, "https://login.globex.example/")
    make_issuer(agent.tenant, "https://old.acme.example/", is_active=False)

    # then
    def oidc_urls(card):
        return sorted(
            s["openIdConnectSecurityScheme"]["openIdConnectUrl"].split("/.well-known")[0]
            for s in card["securitySchemes"].values()
            if "openIdConnectSecurityScheme" in s
        )

    assert oidc_urls(agent_card_json(agent, strict=True)) == [
        "https://id.platform.example",
        "https://login.acme.example",
    ]
    assert oidc_urls(agent_card_json(other, strict=True)) == [
        "https://id.platform.example",
        "https://login.globex.example",
    ]


def test_an_issuer_registered_by_the_tenant_and_platform_wide_is_listed_once_as_the_tenants(
    agent,
):
    make_issuer(None, scopes={"send": ["platform.send"]})
    make_issuer(agent.tenant)
    card = agent_card_json(agent, strict=True)
    oidc = [name for name in card["securitySchemes"] if name.startswith("oidc-")]
    assert len(oidc) == 1
    requirement = next(r for r in card["securityRequirements"] if oidc[0] in r["schemes"])
    assert requirement["schemes"][oidc[0]]["list"] == ["a2a.send", "a2a.read"]


def test_scheme_names_follow_the_issuer_not_its_row(agent):
    first = make_issuer(agent.tenant)
    names = set(agent_card_json(agent, strict=True)["securitySchemes"])
    first.delete()
    make_issuer(agent.tenant)  # registered again: another row, the same `iss`
    assert set(agent_card_json(agent, strict=True)["securitySchemes"]) == names
    # Two realms of one provider are two issuers.
    make_issuer(agent.tenant, ISS.replace("staff", "customers"))
    oidc = [n for n in agent_card_json(agent, strict=True)["securitySchemes"] if "oidc" in n]
    assert len(oidc) == 2 and all(n.startswith("oidc-login.example.com-") for n in oidc)


@pytest.mark.parametrize(
    "discovered, scopes, flows",
    [
        ({}, SCOPES, []),  # not discovered yet: OpenID Connect alone
        ({"token_endpoint": DISCOVERED["token_endpoint"]}, SCOPES, ["client"]),
        (DISCOVERED, {}, []),  # a flow's scopes may not be empty
        ({"token_endpoint": 42, "authorization_endpoint": []}, SCOPES, []),
        ({"token_endpoint": "javascript:alert(1)"}, SCOPES, []),
        ({"token_endpoint": "/relative/token"}, SCOPES, []),
        (
            {"token_endpoint": DISCOVERED["token_endpoint"], "authorization_endpoint": "x"},
            SCOPES,
            ["client"],
        ),
    ],
)
def test_oauth2_flows_only_from_endpoints_discovery_gave_and_with_scopes(
    agent, discovered, scopes, flows
):
    make_issuer(agent.tenant, discovered=discovered, scopes=scopes)
    names = agent_card_json(agent, strict=True)["securitySchemes"]
    assert sorted(n.split("-")[1] for n in names if n.startswith("oauth2-")) == flows
    assert sum(n.startswith("oidc-") for n in names) == 1


def test_building_a_card_fetches_nothing(agent, monkeypatch):
    make_issuer(agent.tenant, discovered={})

    def no_network(*args, **kwargs):
        raise AssertionError("a card was built with a network call")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    card = agent_card_build(agent, extended=True)
    assert any(
        s.HasField("open_id_connect_security_scheme") for s in card.security_schemes.values()
    )


def test_the_v01_card_names_token_schemes_as_bearer(agent):
    make_issuer(agent.tenant)
    card = v01_card_json(agent_card_build(agent))
    assert card["authentication"] == {"schemes": ["apiKey", "bearer"]}


def test_the_cards_proto_json_is_what_the_sdk_warns_nothing_about(agent, caplog):
    make_issuer(agent.tenant)
    MessageToDict(agent_card_build(agent))
    agent_card_json(agent)
    assert "not spec-compliant" not in caplog.text
