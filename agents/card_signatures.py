"""Signed agent cards (A2A v1.0 §8.4): a JWS by the tenant's active signing key over the
card's RFC 8785 form, made by the a2a-sdk's signer, kept per card and key (docs/identity-cards.md).

ES256 signatures are randomised: signing the same card twice gives two signatures, both
valid. So a card's ETag is taken over the card without its signature (and the key's id), and
each process keeps the signature it made for a card and key, so that a card served again is
served with the same bytes and costs no signing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from a2a.compat.v0_3 import conversions
from a2a.types import AgentCard, AgentCardSignature
from a2a.utils.errors import VersionNotSupportedError
from a2a.utils.signing import create_agent_card_signer

from a2a_platform.versions import V0_3

from . import crypto
from .cards import agent_card_build, card_digest, tenant_jwks_url
from .models import Agent, SigningKey
from .services import signing_key_active

# Signatures kept per process: one per (card, key, JWKS URL). A card is a few hundred bytes of
# signature to keep; agents times their host names times extended or not bounds what is asked.
SIGNATURES_KEPT = 1024
_signatures: OrderedDict[tuple[bytes, str, str], AgentCardSignature] = OrderedDict()
_lock = threading.Lock()


def card_sign(card: AgentCard, *, signing_key: SigningKey, jku: str) -> AgentCard:
    """`card` (changed in place) with one signature: by `signing_key`, its protected header
    naming the key (`kid`), its algorithm and where the key is published (`jku`)."""
    del card.signatures[:]
    kept = (card_digest(card), signing_key.kid, jku)
    with _lock:
        signature = _signatures.get(kept)
        if signature is not None:
            _signatures.move_to_end(kept)
    if signature is None:
        signer = create_agent_card_signer(
            signing_key=crypto.decrypt(signing_key.private_key_encrypted),
            protected_header={
                "alg": signing_key.algorithm,
                "typ": "JOSE",
                "kid": signing_key.kid,
                "jku": jku,
            },
        )
        signature = AgentCardSignature()
        signature.CopyFrom(signer(card).signatures[-1])
        with _lock:
            _signatures[kept] = signature
            while len(_signatures) > SIGNATURES_KEPT:
                _signatures.popitem(last=False)
    else:
        card.signatures.append(signature)
    return card


def agent_card_sign(
    agent: Agent, card: AgentCard, *, signing_key: SigningKey | None = None
) -> AgentCard:
    """`card`, the agent's, signed with its tenant's active key (made on first use)."""
    key = signing_key or signing_key_active(tenant=agent.tenant)
    return card_sign(card, signing_key=key, jku=tenant_jwks_url(agent.tenant.slug))


def as_v03_reads(card: AgentCard) -> AgentCard:
    """The card a v0.3 client holds after reading the v0.3 form of `card` (the SDK's own
    conversions, there and back): what a signature must cover for such a client to verify
    it. An agent without v0.3 interfaces has no v0.3 form: `card` as it is."""
    try:
        return conversions.to_core_agent_card(conversions.to_compat_agent_card(card))
    except VersionNotSupportedError:
        return card


def agent_card_extended(agent: Agent, *, dialect: str) -> AgentCard:
    """The extended card GetExtendedAgentCard answers in `dialect`, signed: a v0.3 answer is
    signed as its readers will hold it (`as_v03_reads`)."""
    card = agent_card_build(agent, extended=True)
    if dialect == V0_3:
        card = as_v03_reads(card)
    return agent_card_sign(agent, card)
