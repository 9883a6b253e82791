"""Signed agent cards: the a2a-sdk's JWS over the card's RFC 8785 form, by the tenant's active
key, verifiable in both served views, kept per card and key, and a rotation's new key at once."""

from __future__ import annotations

import base64
import copy
import json

import jwt
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import conversions
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

from a2a_platform.versions import V0_3, V1_0
from agents import card_signatures
from agents.card_signatures import agent_card_extended, agent_card_sign, as_v03_reads
from agents.cards import agent_card_build, card_etag, card_view, tenant_jwks_url
from agents.selectors import jwks_for
from agents.services import signing_key_active, signing_key_rotate


def verifier(tenant):
    """The SDK's verifier with the tenant's published keys (what its JWKS URL serves)."""
    keys = jwt.PyJWKSet.from_dict(dict(jwks_for(tenant=tenant)))

    def key_of(kid, jku):
        return keys[kid]

    return create_signature_verifier(key_of, ["ES256"])


def header_of(card):
    protected = card.signatures[0].protected
    return json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))


@pytest.fixture
def agent(make_tenant, make_agent):
    agent = make_agent(make_tenant(), "helper")
    # Beyond ASCII: RFC 8785 writes it as UTF-8, where JSON encoders usually escape it.
    agent.description = "Hilft gern – auf Deutsch, 日本語 too."
    agent.save()
    return agent


def test_a_signed_card_verifies_in_both_views_with_the_sdks_verifier(agent):
    # given
    card = agent_card_sign(agent, agent_card_build(agent))
    key = signing_key_active(tenant=agent.tenant)
    # then
    assert len(card.signatures) == 1
    assert header_of(card) == {
        "alg": "ES256",
        "typ": "JOSE",
        "kid": key.kid,
        "jku": tenant_jwks_url(agent.tenant.slug),
    }
    verify = verifier(agent.tenant)
    for strict in (True, False):
        served = json.loads(json.dumps(card_view(card, strict=strict)))  # as sent
        assert served["signatures"] == [
            {"protected": card.signatures[0].protected, "signature": card.signatures[0].signature}
        ]
        verify(parse_agent_card(served))


@pytest.mark.parametrize("strict", [True, False])
def test_a_changed_byte_does_not_verify(agent, strict):
    card = agent_card_sign(agent, agent_card_build(agent))
    served = card_view(card, strict=strict)
    verify = verifier(agent.tenant)
    verify(parse_agent_card(copy.deepcopy(served)))
    for change in (
        lambda c: c.update(description=c["description"].replace("gern", "gerne")),
        lambda c: c["supportedInterfaces"][0].update(url="https://evil.example/"),
        lambda c: c["skills"][0].update(name=c["skills"][0]["name"] + "!"),
        lambda c: c["capabilities"].update(pushNotifications=False),
    ):
        tampered = copy.deepcopy(served)
        change(tampered)
        with pytest.raises(InvalidSignaturesError):
            verify(parse_agent_card(tampered))


def test_a_signature_is_made_once_per_card_and_key(agent, make_agent):
    first = agent_card_sign(agent, agent_card_build(agent))
    again = agent_card_sign(agent, agent_card_build(agent))
    assert again.signatures[0] == first.signatures[0]  # kept: the same bytes served
    other = agent_card_sign(agent, agent_card_build(make_agent(agent.tenant, "other")))
    assert other.signatures[0] != first.signatures[0]
    agent.extended_skills = [{"id": "x", "name": "X", "description": "d", "tags": ["x"]}]
    extended = agent_card_sign(agent, agent_card_build(agent, extended=True))
    assert extended.signatures[0] != first.signatures[0]


def test_the_kept_signatures_are_bounded(agent, make_agent, monkeypatch):
    monkeypatch.setattr(card_signatures, "SIGNATURES_KEPT", 2)
    card_signatures._signatures.clear()
    for slug in ("a", "b", "c"):
        agent_card_sign(agent, agent_card_build(make_agent(agent.tenant, slug)))
    assert len(card_signatures._signatures) == 2


def test_a_rotation_signs_with_the_new_key_at_once(agent):
    old = agent_card_sign(agent, agent_card_build(agent))
    new_key = signing_key_rotate(tenant=agent.tenant)
    new = agent_card_sign(agent, agent_card_build(agent))
    assert header_of(old)["kid"] != header_of(new)["kid"] == new_key.kid
    verifier(agent.tenant)(new)
    verifier(agent.tenant)(old)  # the old key stays published until retired


def test_the_etag_ignores_the_signature_and_follows_the_view_and_the_key(agent):
    card = agent_card_build(agent)
    kid = signing_key_active(tenant=agent.tenant).kid
    etag = card_etag(card, strict=False, kid=kid)
    assert etag.startswith('W/"')
    assert card_etag(agent_card_sign(agent, card), strict=False, kid=kid) == etag
    assert card_etag(card, strict=True, kid=kid) != etag
    assert card_etag(card, strict=False, kid="another") != etag
    agent.description = "Changed."
    assert card_etag(agent_card_build(agent), strict=False, kid=kid) != etag


@pytest.mark.parametrize("dialect", [V1_0, V0_3])
def test_the_extended_card_verifies_as_its_dialect_carries_it(agent, dialect):
    card = agent_card_extended(agent, dialect=dialect)
    if dialect == V0_3:
        # What the v0.3 transports of the SDK hand their caller: the v0.3 card, read back.
        card = conversions.to_core_agent_card(conversions.to_compat_agent_card(card))
    verifier(agent.tenant)(card)


def test_the_v03_form_of_a_card_is_what_v03_carries(agent):
    card = agent_card_build(agent, extended=True)
    reads = as_v03_reads(card)
    assert conversions.to_compat_agent_card(reads) == conversions.to_compat_agent_card(card)
    assert as_v03_reads(reads) == reads


def test_an_agent_without_v03_has_its_extended_card_signed_as_it_is(make_tenant, make_agent):
    agent = make_agent(make_tenant(), "modern", protocol_versions="1.0")
    card = agent_card_extended(agent, dialect=V0_3)
    verifier(agent.tenant)(card)
