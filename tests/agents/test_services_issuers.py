"""Token issuers as their tenant's people change them (agents.services): updated, deactivated and
deleted with the model's checks, and checked now against a real local OpenID provider
(tests/e2e/oidc_provider.py) and a server of bad documents, over real sockets through the SSRF
guard: each failure names the document, its URL and what is wrong."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from agents import limits
from agents.models import Issuer
from agents.services import (
    IssuerCheckFailed,
    issuer_check,
    issuer_create,
    issuer_delete,
    issuer_set_active,
    issuer_update,
)
from tests.e2e.oidc_provider import Provider, SigningKey

AUDIENCE = "https://agents.example.com/a2a/acme/helper/"


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


@pytest.fixture
def loopback(settings: Any) -> None:
    """The local servers are on 127.0.0.1, which the SSRF guard refuses unless allowed."""
    settings.A2A_IDENTITY_ALLOWED_NETWORKS = ["127.0.0.0/8"]


class Documents:
    """A local HTTP server answering each path with what a test put there (404 elsewhere)."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, bytes]] = {}
        documents = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                status, body = documents.answers.get(self.path, (404, b"{}"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, path: str, body: Any, status: int = 200) -> str:
        self.answers[path] = (
            status,
            body if isinstance(body, bytes) else json.dumps(body).encode(),
        )
        return self.url + path


@pytest.fixture
def documents() -> Iterator[Documents]:
    server = Documents()
    yield server
    server.server.shutdown()
    server.server.server_close()


def registered(tenant: Any, issuer: str, **fields: Any) -> Issuer:
    return issuer_create(tenant=tenant, issuer=issuer, audiences=[AUDIENCE], **fields)


# --- update, deactivate, delete -----------------------------------------------------------------


def test_an_update_is_checked_as_a_creation_and_writes_nothing_when_refused(make_tenant):
    issuer = registered(make_tenant(), "https://login.example.com/realms/a", name="Staff")
    # when the audiences are emptied and an HMAC algorithm asked for
    with pytest.raises(ValidationError) as refused:
        issuer_update(issuer=issuer, fields={"audiences": [], "algorithms": ["HS256"]})
    # then both fields are named, and the row is as it was
    assert {"audiences", "algorithms"} <= set(refused.value.message_dict)
    stored = Issuer.objects.get(pk=issuer.pk)
    assert (stored.audiences, stored.algorithms) == ([AUDIENCE], ["RS256", "ES256"])
    # a good change is stored
    issuer_update(
        issuer=stored,
        fields={"audiences": ["api://agents"], "scopes": {"send": ["a2a.send"]}, "name": ""},
    )
    stored = Issuer.objects.get(pk=issuer.pk)
    assert stored.audiences == ["api://agents"]
    assert stored.required_scopes("send") == ("a2a.send",)
    assert stored.name == "https://login.example.com/realms/a"  # empty: the URL names it


def test_a_new_issuer_url_forgets_what_discovery_said_of_the_old_one(make_tenant):
    issuer = registered(make_tenant(), "https://login.example.com/realms/a")
    Issuer.objects.filter(pk=issuer.pk).update(discovered={"jwks_uri": "https://old/keys"})
    issuer.refresh_from_db()
    issuer_update(issuer=issuer, fields={"user_claim": "email"})
    assert Issuer.objects.get(pk=issuer.pk).discovered == {"jwks_uri": "https://old/keys"}
    issuer_update(issuer=issuer, fields={"issuer": " https://login.example.com/realms/b "})
    stored = Issuer.objects.get(pk=issuer.pk)
    assert (stored.issuer, stored.discovered) == ("https://login.example.com/realms/b", {})


def test_an_update_takes_only_the_registrations_fields(make_tenant):
    issuer = registered(make_tenant(), "https://login.example.com/realms/a")
    with pytest.raises(ValueError, match="discovered, tenant"):
        issuer_update(issuer=issuer, fields={"tenant": None, "discovered": {}})


def test_an_issuer_registered_twice_for_a_tenant_is_refused_on_update_too(make_tenant):
    tenant = make_tenant()
    registered(tenant, "https://login.example.com/realms/a")
    other = registered(tenant, "https://login.example.com/realms/b")
    with pytest.raises(ValidationError, match="already registered for the tenant"):
        issuer_update(issuer=other, fields={"issuer": "https://login.example.com/realms/a"})


def test_audiences_and_scopes_are_bounded(make_tenant):
    issuer = registered(make_tenant(), "https://login.example.com/realms/a")
    too_many = [f"aud-{n}" for n in range(limits.ISSUER_AUDIENCES + 1)]
    too_long = "a" * (limits.ISSUER_AUDIENCE + 1)
    for audiences, words in (
        (too_many, f"at most {limits.ISSUER_AUDIENCES} audiences"),
        ([AUDIENCE, too_long], f"Audience #2 must be at most {limits.ISSUER_AUDIENCE}"),
        (["api\x00x"], r"U\+0000"),
    ):
        with pytest.raises(ValidationError, match=words):
            issuer_update(issuer=issuer, fields={"audiences": audiences})
    scopes = [f"s{n}" for n in range(limits.ISSUER_SCOPES + 1)]
    with pytest.raises(ValidationError, match=f"at most {limits.ISSUER_SCOPES} scopes for 'read'"):
        issuer_update(issuer=issuer, fields={"scopes": {"read": scopes}})


def test_deactivated_then_deleted(make_tenant):
    issuer = registered(make_tenant(), "https://login.example.com/realms/a")
    issuer_set_active(issuer=issuer, active=False)
    assert not Issuer.objects.get(pk=issuer.pk).is_active
    issuer_set_active(issuer=issuer, active=True)
    assert Issuer.objects.get(pk=issuer.pk).is_active
    issuer_delete(issuer=issuer)
    assert not Issuer.objects.filter(pk=issuer.pk).exists()


# --- checking now -------------------------------------------------------------------------------


def test_a_check_reads_discovery_and_keys_and_records_what_discovery_said(
    make_tenant, provider, loopback
):
    issuer = registered(make_tenant(), provider.issuer)
    reads = (provider.discovery_reads, provider.jwks_reads)
    summary = issuer_check(issuer=issuer)
    assert summary == f"2 keys: RS256, ES256; token endpoint {provider.issuer}/token"
    assert (provider.discovery_reads, provider.jwks_reads) == (reads[0] + 1, reads[1] + 1)
    discovered = Issuer.objects.get(pk=issuer.pk).discovered
    assert discovered["jwks_uri"] == f"{provider.issuer}/keys"
    assert discovered["token_endpoint"] == f"{provider.issuer}/token"
    assert discovered["authorization_endpoint"] == f"{provider.issuer}/auth"
    assert discovered["read_at"]


def test_keys_are_counted_by_algorithm_and_those_that_fit_none_are_said(
    make_tenant, provider, loopback
):
    # given a set of two RS256 keys, an ES256 one, and an issuer that accepts RS256 only
    extra = SigningKey.new("RS256")
    provider.keys.append(extra)
    try:
        issuer = registered(make_tenant(), provider.issuer, algorithms=["RS256"])
        summary = issuer_check(issuer=issuer)
    finally:
        provider.keys.remove(extra)
    assert summary.startswith("2 keys: RS256 ×2 (1 other not usable: ES256, not an algorithm ")
    assert summary.endswith(f"; token endpoint {provider.issuer}/token")


def test_a_registered_jwks_uri_is_read_without_discovery(make_tenant, provider, loopback):
    issuer = registered(
        make_tenant(), "https://idp.example.com", jwks_uri=f"{provider.issuer}/keys"
    )
    reads = provider.discovery_reads
    summary = issuer_check(issuer=issuer)
    assert (
        summary == "2 keys: RS256, ES256; key set at the registered jwks_uri (discovery not read)"
    )
    assert provider.discovery_reads == reads
    assert Issuer.objects.get(pk=issuer.pk).discovered == {}


def test_the_ssrf_guard_refuses_a_loopback_issuer_and_says_how_to_allow_it(make_tenant, provider):
    issuer = registered(make_tenant(), provider.issuer)
    with pytest.raises(IssuerCheckFailed) as failed:
        issuer_check(issuer=issuer)
    message = str(failed.value)
    assert message.startswith(f"Discovery document: {issuer.discovery_url} may not be fetched: ")
    assert "a loopback address" in message and "A2A_IDENTITY_ALLOWED_NETWORKS" in message


def test_an_unreachable_issuer_is_said_so(make_tenant, loopback):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    issuer = registered(make_tenant(), f"http://127.0.0.1:{port}/realms/gone")
    with pytest.raises(IssuerCheckFailed, match=r"could not be read: ConnectError"):
        issuer_check(issuer=issuer)


WELL_KNOWN = "/.well-known/openid-configuration"


@pytest.mark.parametrize(
    "discovery, status, words",
    [
        (b"<html>sign in</html>", 200, "is not JSON"),
        ([1, 2], 200, "is not a JSON object"),
        ({"error": "nope"}, 500, "answered HTTP 500"),
        ({"issuer": "{url}"}, 200, "names no jwks_uri"),
        (
            {"issuer": "https://elsewhere.example.com", "jwks_uri": "{url}/keys"},
            200,
            "names the issuer 'https://elsewhere.example.com', not",
        ),
        ({"jwks_uri": "{url}/keys"}, 200, "names no issuer"),
    ],
)
def test_a_bad_discovery_document_is_named_with_what_is_wrong(
    make_tenant, documents, loopback, discovery, status, words
):
    if isinstance(discovery, dict):
        discovery = {k: v.format(url=documents.url) for k, v in discovery.items()}
    documents.put(WELL_KNOWN, discovery, status)
    issuer = registered(make_tenant(), documents.url)
    with pytest.raises(IssuerCheckFailed) as failed:
        issuer_check(issuer=issuer)
    assert str(failed.value).startswith(f"Discovery document: {documents.url}{WELL_KNOWN} ")
    assert words in str(failed.value)
    assert Issuer.objects.get(pk=issuer.pk).discovered == {}


@pytest.mark.parametrize(
    "keys, words",
    [
        (b"not json", "is not JSON"),
        ({"kty": "RSA"}, 'has no "keys" list'),
        ({"keys": []}, "has no key that verifies RS256, ES256 signatures (it has no keys)"),
        (
            {
                "keys": [
                    {"kty": "oct", "k": "c2VjcmV0"},
                    {"kty": "RSA", "use": "enc", "n": "x", "e": "AQAB"},
                ]
            },
            "(2 others not usable: a shared secret (kty oct), never accepted; a key for 'enc', "
            "not for signatures)",
        ),
        (
            {"keys": [{"kty": "RSA", "n": "bad", "e": "AQAB"}]},
            "a key of type RSA that fits none of RS256, ES256",
        ),
    ],
)
def test_a_key_set_without_a_usable_key_is_named_with_what_is_wrong(
    make_tenant, documents, loopback, keys, words
):
    documents.put(WELL_KNOWN, {"issuer": documents.url, "jwks_uri": documents.url + "/keys"})
    documents.put("/keys", keys)
    issuer = registered(make_tenant(), documents.url)
    with pytest.raises(IssuerCheckFailed) as failed:
        issuer_check(issuer=issuer)
    assert str(failed.value).startswith(f"Key set: {documents.url}/keys ")
    assert words in str(failed.value)
    # what discovery said is kept: it was read and fits
    assert Issuer.objects.get(pk=issuer.pk).discovered["jwks_uri"] == documents.url + "/keys"


def test_a_redirect_is_not_followed_and_is_said_so(make_tenant, documents, loopback):
    documents.put(WELL_KNOWN, {}, 302)
    issuer = registered(make_tenant(), documents.url)
    with pytest.raises(IssuerCheckFailed, match="a redirect .*; redirects are not followed"):
        issuer_check(issuer=issuer)


def test_what_discovery_said_is_kept_only_as_text_a_row_holds(make_tenant, documents, loopback):
    key = SigningKey.new("ES256")
    documents.put(
        WELL_KNOWN,
        {
            "issuer": documents.url,
            "jwks_uri": documents.url + "/keys",
            "token_endpoint": "https://idp.example.com/tok\u0000en",
            "authorization_endpoint": {"not": "a URL"},
            "scopes_supported": ["openid", 7, "a2a.send"],
        },
    )
    documents.put("/keys", {"keys": [key.jwk()]})
    issuer = registered(make_tenant(), documents.url)
    assert issuer_check(issuer=issuer) == "1 key: ES256; no token endpoint"
    discovered = Issuer.objects.get(pk=issuer.pk).discovered
    assert discovered["scopes_supported"] == ["openid", "a2a.send"]
    assert "token_endpoint" not in discovered and "authorization_endpoint" not in discovered
