"""Signed agent cards over real HTTP and gRPC: every card the platform serves (the public card
in both views, at the agent's path and its own host, and the extended card on every binding
in both versions) verifies with the a2a-sdk's verifier against the keys of the platform's JWKS
URL; a changed byte does not; a rotated key signs at once."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx
import jwt
import pytest
from a2a.client import A2ACardResolver
from a2a.client.card_resolver import parse_agent_card
from a2a.types import GetExtendedAgentCardRequest
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

from agents.models import Issuer
from agents.services import signing_key_active, signing_key_rotate

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, Loopback, sdk_client

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
CARD = ".well-known/agent-card.json"
V1_0_HEADERS = {"A2A-Version": "1.0"}


def verifier_from(jwks_url: str):
    """The SDK's verifier with the keys the platform publishes at `jwks_url` (read when a
    signature names a key not read yet)."""
    keys = jwt.PyJWKClient(jwks_url)
    return create_signature_verifier(lambda kid, jku: keys.get_signing_key(kid), ["ES256"])


def protected_header(served: dict) -> dict:
    protected = served["signatures"][0]["protected"]
    return json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))


@pytest.fixture
def agent(make_tenant, make_agent):
    agent = make_agent(
        make_tenant(),
        "echo",
        extended_skills=[{"id": "x", "name": "X", "description": "d", "tags": ["t"]}],
    )
    # A card that says how to get a token, and text beyond ASCII (RFC 8785 writes it raw).
    Issuer.objects.create(
        tenant=agent.tenant,
        name="Staff",
        issuer="https://login.example.com/realms/staff",
        audiences=["https://agents.example.com/"],
        scopes={"send": ["a2a.send"], "read": ["a2a.read"]},
        discovered={
            "token_endpoint": "https://login.example.com/realms/staff/token",
            "authorization_endpoint": "https://login.example.com/realms/staff/auth",
        },
    )
    agent.description = "Répète tout – 日本語も."
    agent.save()
    return agent


def test_the_public_card_verifies_in_both_views_and_at_every_address(http, live_platform, agent):
    verify = verifier_from(f"{live_platform.url}/.well-known/jwks.json")
    port = live_platform.url.rpartition(":")[2]
    roots = {
        "path": live_platform.agent_url(agent),
        "host": f"http://{agent.slug}--{agent.tenant.slug}.localhost:{port}/",
    }
    key = signing_key_active(tenant=agent.tenant)

    async def fetch(root: str, card_path: str, headers: dict):
        async with httpx.AsyncClient(transport=Loopback(), headers=headers) as client:
            # The SDK's resolver checks the card with the verifier as it reads it.
            return await A2ACardResolver(client, root, card_path).get_agent_card(
                signature_verifier=verify
            )

    for where, root in roots.items():
        for card_path in (CARD, ".well-known/agent.json"):
            for headers in ({}, V1_0_HEADERS):
                card = asyncio.run(fetch(root, card_path, headers))
                assert card.supported_interfaces[0].url == root, where
                assert len(card.signatures) == 1
    served = http.get(roots["path"] + CARD).json()
    assert protected_header(served) == {
        "alg": "ES256",
        "typ": "JOSE",
        "kid": key.kid,
        "jku": f"{live_platform.url}/a2a/{agent.tenant.slug}/.well-known/jwks.json",
    }
    # The `jku` is the tenant's JWKS: its keys verify the card too.
    verifier_from(protected_header(served)["jku"])(parse_agent_card(served))


@pytest.mark.parametrize("headers", [{}, V1_0_HEADERS], ids=["merged", "strict"])
def test_a_card_with_one_byte_changed_does_not_verify(http, live_platform, agent, headers):
    verify = verifier_from(f"{live_platform.url}/.well-known/jwks.json")
    served = http.get(live_platform.agent_url(agent) + CARD, headers=headers).json()
    verify(parse_agent_card(copy.deepcopy(served)))
    tampered = copy.deepcopy(served)
    tampered["description"] = tampered["description"].replace("R", "r", 1)
    with pytest.raises(InvalidSignaturesError):
        verify(parse_agent_card(tampered))
    # The signature itself, one character changed.
    tampered = copy.deepcopy(served)
    signature = tampered["signatures"][0]["signature"]
    tampered["signatures"][0]["signature"] = ("B" if signature[0] == "A" else "A") + signature[1:]
    with pytest.raises(InvalidSignaturesError):
        verify(parse_agent_card(tampered))


def test_revalidation_is_cheap_and_a_rotation_serves_the_new_key(http, live_platform, agent):
    url = live_platform.agent_url(agent) + CARD
    first = http.get(url)
    etag, last_modified = first.headers["ETag"], first.headers["Last-Modified"]
    old_kid = protected_header(first.json())["kid"]
    # The same card again: the same signature (kept), the same tag, 304 on revalidation.
    assert http.get(url).json()["signatures"] == first.json()["signatures"]
    assert http.get(url, headers={"If-None-Match": etag}).status_code == 304
    assert http.get(url, headers={"If-Modified-Since": last_modified}).status_code == 304

    new_key = signing_key_rotate(tenant=agent.tenant)

    # The tag names the key: a client that revalidates gets the card signed by the new one.
    rotated = http.get(url, headers={"If-None-Match": etag})
    assert rotated.status_code == 200
    assert protected_header(rotated.json())["kid"] == new_key.kid != old_kid
    assert rotated.headers["ETag"] != etag
    # Last-Modified moves with the key (HTTP dates count whole seconds).
    changed = parsedate_to_datetime(rotated.headers["Last-Modified"])
    assert changed == new_key.created_at.replace(microsecond=0)
    verify = verifier_from(f"{live_platform.url}/.well-known/jwks.json")
    verify(parse_agent_card(rotated.json()))


BINDINGS = pytest.mark.parametrize(
    "version, binding",
    [(v, b) for v in (V1_0, V0_3) for b in (JSONRPC, HTTP_JSON, GRPC)],
)


@BINDINGS
def test_the_extended_card_verifies_on_every_binding(
    live_platform, agent, make_key, version, binding
):
    verify = verifier_from(f"{live_platform.url}/.well-known/jwks.json")
    key = make_key(agent.tenant)

    async def scenario():
        async with sdk_client(
            live_platform.agent_url(agent), key=key, version=version, binding=binding
        ) as client:
            # The SDK's client checks the card with the verifier before it hands it over.
            return await client.get_extended_agent_card(
                GetExtendedAgentCardRequest(), signature_verifier=verify
            )

    card = asyncio.run(scenario())
    assert [s.id for s in card.skills] == ["x"]  # the extended skill
    assert len(card.signatures) == 1
    tampered = type(card)()
    tampered.CopyFrom(card)
    tampered.skills[0].name = "Y"
    with pytest.raises(InvalidSignaturesError):
        verify(tampered)


def test_the_documented_verification_runs(live_platform, agent):
    doc = (ROOT / "docs" / "identity-cards.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.S)
    example = next(b for b in blocks if "create_signature_verifier" in b)
    code = (
        example.replace("https://a2a.example.com/a2a/acme/helper/", live_platform.agent_url(agent))
        .replace(
            "https://a2a.example.com/a2a/acme/", f"{live_platform.url}/a2a/{agent.tenant.slug}/"
        )
        .replace("https://a2a.example.com", live_platform.url)
    )
    assert "example.com" not in code
    namespace: dict = {}
    exec(compile(code, "docs/identity-cards.md", "exec"), namespace)
    assert namespace["card"].name == agent.name
    assert len(namespace["card"].signatures) == 1
