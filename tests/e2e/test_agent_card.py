"""The served agent card, over real HTTP: both protocol versions, absolute URLs, HTTP caching."""

from __future__ import annotations

import asyncio
from email.utils import parsedate_to_datetime

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import StringList

from agents.models import Issuer
from agents.services import signing_key_active

from .clients import sdk_client, send, user_message
from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CARD = ".well-known/agent-card.json"
LEGACY_CARD = ".well-known/agent.json"
SKILL = {"id": "echo", "name": "Echo", "description": "Repeats you.", "tags": ["demo"]}
SECRET_SKILL = {"id": "x", "name": "X", "description": "d", "tags": ["t"]}


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(
        make_tenant(),
        "echo",
        skills=[SKILL],
        extended_skills=[SECRET_SKILL],
        default_input_modes=["text/plain", "application/json"],
    )


def test_card_advertises_both_versions_with_absolute_urls(http, live_platform, agent):
    url = live_platform.agent_url(agent)
    bodies = []
    for path in (CARD, LEGACY_CARD):
        response = http.get(url + path)
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        card = response.json()
        bodies.append(card)
        interfaces = card["supportedInterfaces"]
        assert [(i["protocolBinding"], i["protocolVersion"]) for i in interfaces] == [
            ("JSONRPC", "1.0"),
            ("HTTP+JSON", "1.0"),
            ("JSONRPC", "0.3"),
            ("HTTP+JSON", "0.3"),
            ("GRPC", "1.0"),
            ("GRPC", "0.3"),
            ("GRPC", "0.3"),
        ]
        # v0.3 gRPC requests name no agent: those interfaces give the agent's own host name
        # (A2A_AGENT_HOST_PATTERN is set on the live platform) at the sidecar's port, as a
        # target and as a URL.
        grpc_port = live_platform.grpc_address.rpartition(":")[2]
        v03 = f"{agent.slug}--{agent.tenant.slug}.localhost:{grpc_port}"
        assert [i["url"] for i in interfaces] == [url, url.rstrip("/")] * 2 + [
            live_platform.grpc_address,
            v03,
            f"grpc://{v03}",
        ]
        # v1.0 gRPC clients copy the tenant into every request; the sidecar routes on it.
        assert interfaces[4]["tenant"] == f"{agent.tenant.slug}/{agent.slug}"
        assert "tenant" not in interfaces[5] and "tenant" not in interfaces[6]
        # v0.3 clients find the REST binding among the additional interfaces.
        assert ("HTTP+JSON", url.rstrip("/")) in {
            (i["transport"], i["url"]) for i in card["additionalInterfaces"]
        }
        assert url.startswith(live_platform.url + "/a2a/")
        # The v0.3 fields, for 0.3 clients.
        assert card["url"] == url
        assert card["preferredTransport"] == "JSONRPC"
        assert card["protocolVersion"] == "0.3"
        assert card["capabilities"]["streaming"] is True
        assert card["capabilities"]["pushNotifications"] is True
        assert card["supportsAuthenticatedExtendedCard"] is True
        assert card["name"] == "Echo" and card["description"] == "The echo agent."
        assert card["defaultInputModes"] == ["text/plain", "application/json"]
        assert [s["id"] for s in card["skills"]] == ["echo"]  # not the extended skill
        assert set(card["securitySchemes"]) == {"apiKey", "bearer"}
        assert {} not in card["securityRequirements"]  # private: a key is required
    assert bodies[0] == bodies[1]


def test_card_urls_are_the_endpoints(http, live_platform, agent, make_key):
    card = http.get(live_platform.agent_url(agent) + CARD).json()
    key = make_key(agent.tenant)
    for interface in card["supportedInterfaces"]:
        version = interface["protocolVersion"]
        if interface["protocolBinding"] == "GRPC":
            continue  # the sidecar's address: tests/e2e/test_grpc.py calls it
        if interface["protocolBinding"] == "HTTP+JSON":
            # A REST client appends the operation's path to the interface URL.
            tasks = interface["url"] + ("/v1/tasks" if version == "0.3" else "/tasks")
            response = http.get(tasks, headers={"A2A-Version": version, "X-API-Key": key})
            assert response.status_code == 200, response.text
            assert "tasks" in response.json()
            continue
        method = "ListTasks" if interface["protocolVersion"] == "1.0" else "tasks/list"
        response = http.post(
            interface["url"],
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {}},
            headers={"A2A-Version": interface["protocolVersion"], "X-API-Key": key},
        )
        assert response.status_code == 200
        assert response.json()["result"]["tasks"] == []


def test_public_agent_card_allows_anonymous_callers(http, live_platform, make_tenant, make_agent):
    agent = make_agent(make_tenant(), "pub", visibility="public")
    card = http.get(live_platform.agent_url(agent) + CARD).json()
    assert {} in card["securityRequirements"]
    assert {} in card["security"]


def test_card_says_whether_the_agent_offers_push_notifications(
    http, live_platform, make_tenant, make_agent
):
    tenant = make_tenant()
    for slug, offered in (("pushing", True), ("quiet", False)):
        agent = make_agent(tenant, slug, push_notifications=offered)
        card = http.get(live_platform.agent_url(agent) + CARD).json()
        assert card["capabilities"]["pushNotifications"] is offered, (slug, card["capabilities"])


def test_card_caching_headers_and_conditional_gets(http, live_platform, agent):
    url = live_platform.agent_url(agent) + CARD
    response = http.get(url)
    etag, last_modified = response.headers["ETag"], response.headers["Last-Modified"]
    # Weak: the card's ES256 signature differs from one signing to the next (and process).
    assert etag.startswith('W/"') and etag.endswith('"') and len(etag) > 10
    # The agent's change, or its tenant's signing key's (made as the first card was signed).
    key = signing_key_active(tenant=agent.tenant)
    changed = max(agent.updated_at, key.created_at)
    assert parsedate_to_datetime(last_modified) == changed.replace(microsecond=0)
    cache_control = response.headers["Cache-Control"]
    assert "public" in cache_control and "max-age=300" in cache_control
    assert response.headers["Access-Control-Allow-Origin"] == "*"
    assert http.get(url).headers["ETag"] == etag  # stable

    strong = etag.removeprefix("W/")  # If-None-Match compares weakly (RFC 9110 §13.1.2)
    for if_none_match in (etag, f'"nope", {etag}', "*", strong):
        not_modified = http.get(url, headers={"If-None-Match": if_none_match})
        assert not_modified.status_code == 304, if_none_match
        assert not_modified.content == b""
        assert not_modified.headers["ETag"] == etag
    assert http.get(url, headers={"If-None-Match": '"nope"'}).status_code == 200
    assert http.get(url, headers={"If-Modified-Since": last_modified}).status_code == 304
    old = "Mon, 01 Jan 1990 00:00:00 GMT"
    assert http.get(url, headers={"If-Modified-Since": old}).status_code == 200
    # If-None-Match wins over If-Modified-Since (RFC 9110).
    assert (
        http.get(
            url, headers={"If-None-Match": '"nope"', "If-Modified-Since": last_modified}
        ).status_code
        == 200
    )

    agent.description = "A changed agent."
    agent.save()
    changed = http.get(url, headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.json()["description"] == "A changed agent."
    assert changed.headers["ETag"] != etag


def test_unknown_or_inactive_agent_card_is_404_json(http, live_platform, agent):
    slug = agent.tenant.slug
    for path in (
        f"/a2a/{slug}/nobody/{CARD}",
        f"/a2a/nobody/echo/{CARD}",
        f"/a2a/{slug}/nobody/{LEGACY_CARD}",
    ):
        response = http.get(live_platform.url + path)
        assert response.status_code == 404
        assert response.json()["error"] == "agent_not_found"
    agent.is_active = False
    agent.save()
    response = http.get(live_platform.agent_url(agent) + CARD)
    assert response.status_code == 404 and response.json()["error"] == "agent_not_found"
    assert (
        http.post(
            live_platform.agent_url(agent), json={"jsonrpc": "2.0", "id": 1, "method": "tasks/list"}
        ).status_code
        == 404
    )


def test_a_card_is_only_got(http, live_platform, agent):
    response = http.post(live_platform.agent_url(agent) + CARD, json={})
    assert response.status_code == 405 and response.headers["Allow"] == "GET"


def test_the_sdk_reads_the_issuer_schemes_in_both_views(http, live_platform, agent, make_key):
    # given: an issuer of the agent's tenant, discovered
    Issuer.objects.create(
        tenant=agent.tenant,
        name="Staff",
        issuer="https://login.example.com/realms/staff",
        audiences=[live_platform.agent_url(agent)],
        scopes={"send": ["a2a.send"], "read": ["a2a.read"]},
        discovered={
            "token_endpoint": "https://login.example.com/realms/staff/token",
            "authorization_endpoint": "https://login.example.com/realms/staff/auth",
        },
    )
    url = live_platform.agent_url(agent)

    async def read(headers):
        async with httpx.AsyncClient(headers=headers) as client:
            return await A2ACardResolver(client, url).get_agent_card()

    for headers in ({}, {"A2A-Version": "1.0"}):
        # when: the SDK's resolver reads the served card
        card = asyncio.run(read(headers))
        # then: every scheme in its v1.0 form, whichever view was served
        kinds = {name: s.WhichOneof("scheme") for name, s in card.security_schemes.items()}
        tag = next(n for n in kinds if n.startswith("oidc-")).removeprefix("oidc-")
        assert kinds == {
            "apiKey": "api_key_security_scheme",
            "bearer": "http_auth_security_scheme",
            f"oidc-{tag}": "open_id_connect_security_scheme",
            f"oauth2-client-{tag}": "oauth2_security_scheme",
            f"oauth2-code-{tag}": "oauth2_security_scheme",
        }
        code = card.security_schemes[f"oauth2-code-{tag}"].oauth2_security_scheme.flows
        assert code.authorization_code.token_url == "https://login.example.com/realms/staff/token"
        assert set(code.authorization_code.scopes) == {"a2a.send", "a2a.read"}
        assert [dict(r.schemes) for r in card.security_requirements][2:] == [
            {name: StringList(list=["a2a.send", "a2a.read"])}
            for name in (f"oidc-{tag}", f"oauth2-client-{tag}", f"oauth2-code-{tag}")
        ]

    # and a client built from it still calls the agent with a key
    key = make_key(agent.tenant)

    async def call():
        async with sdk_client(url, key=key) as client:
            return (await send(client, user_message("still works", mid()))).task

    assert asyncio.run(call()).artifacts[0].parts[0].text == "still works"
