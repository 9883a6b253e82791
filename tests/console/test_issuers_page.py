"""The console's Token issuers page (console/views_identity.py): everyone in the tenant sees its
issuers and the platform-wide ones; owners and operators add, edit, deactivate, delete and
check the tenant's own; members are refused (403) and another tenant's people find nothing
(404); bad input comes back on the fields that caused it, never a 500."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from agents.identity import protected_resource_metadata_url
from agents.models import Issuer
from agents.services import issuer_create
from tests.e2e.oidc_provider import Provider

IDP = "https://login.example.com/realms/acme"


def url(name: str, tenant: Any, issuer: Issuer | None = None) -> str:
    kwargs: dict[str, Any] = {"tenant_slug": tenant.slug}
    if issuer is not None:
        kwargs["issuer_id"] = issuer.pk
    return reverse(f"console:{name}", kwargs=kwargs)


def form(**changes: Any) -> dict[str, Any]:
    return {
        "name": "Acme staff",
        "issuer": IDP,
        "audiences": "https://agents.example.com/a2a/acme/helper/\r\n\r\napi://agents\r\n",
        "algorithms": ["RS256", "ES256"],
        "user_claim": "sub",
        "scopes_send": "a2a.send  a2a.write",
        "scopes_read": "",
        "scopes_cancel": "",
        "scopes_push": "",
        "jwks_uri": "",
        **changes,
    }


def field_error(page: str, field: str) -> str:
    found = re.search(rf'id="error-{field}">(.*?)</p>', page, re.S)
    return html.unescape(found[1]) if found else ""


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.fixture
def registered(world):
    return issuer_create(
        tenant=world["a"],
        issuer=IDP,
        audiences=["api://agents"],
        name="Acme staff",
        scopes={"read": ["a2a.read"]},
    )


def test_the_new_form_starts_with_rs256_and_es256_and_sub(client, world):
    client.force_login(world["owner_a"])
    page = client.get(url("issuer-new", world["a"])).content.decode()
    for alg in ("RS256", "ES256"):
        assert re.search(rf'name="algorithms" value="{alg}"[^>]*checked', page), alg
    assert not re.search(r'name="algorithms" value="PS256"[^>]*checked', page)
    assert 'name="algorithms" value="HS256"' not in page  # never offered
    assert re.search(r'name="user_claim" value="sub"', page)
    for operation in ("send", "read", "cancel", "push"):
        assert f'name="scopes_{operation}"' in page


def test_an_owner_adds_an_issuer_and_everyone_in_the_tenant_sees_it(client, world):
    # when the owner adds one
    client.force_login(world["owner_a"])
    response = client.post(url("issuer-new", world["a"]), form())
    # then it is stored as the form said
    assert response.status_code == 302 and response["Location"] == url("issuers", world["a"])
    issuer = Issuer.objects.get(tenant=world["a"])
    assert (issuer.name, issuer.issuer, issuer.user_claim) == ("Acme staff", IDP, "sub")
    assert issuer.audiences == ["https://agents.example.com/a2a/acme/helper/", "api://agents"]
    assert issuer.algorithms == ["RS256", "ES256"]
    assert issuer.scopes == {"send": ["a2a.send", "a2a.write"]}
    assert issuer.is_active and issuer.jwks_uri == "" and issuer.discovered == {}
    # and a member of the tenant sees it, without the controls
    client.force_login(world["member_a"])
    page = client.get(url("issuers", world["a"])).content.decode()
    section = re.search(
        rf'<section class="card issuer" id="issuer-{issuer.pk}".*?</section>', page, re.S
    )
    assert section, page
    shown = section[0]
    for text in (IDP, "api://agents", "RS256, ES256", "a2a.send", "a2a.write", "not read yet"):
        assert text in shown, text
    assert re.search(r'data-operation="read"><b>read</b>: <span class="muted">none', shown)
    assert "issuer-check" not in page and 'id="issuer-add"' not in page
    # another tenant's people see nothing of it
    client.force_login(world["owner_b"])
    assert IDP not in client.get(url("issuers", world["b"])).content.decode()


def test_bad_input_comes_back_on_its_fields_and_nothing_is_stored(client, world, registered):
    client.force_login(world["owner_a"])
    new = url("issuer-new", world["a"])
    cases = [
        ({"issuer": "not a url"}, "issuer", "Enter a valid URL"),
        ({"issuer": IDP}, "issuer", "has this issuer already"),
        ({"issuer": IDP + "/x", "audiences": " \r\n "}, "audiences", "at least one audience"),
        ({"issuer": IDP + "/x", "algorithms": []}, "algorithms", "required"),
        ({"issuer": IDP + "/x", "algorithms": ["HS256"]}, "algorithms", "not one of the available"),
        (
            {"issuer": IDP + "/x", "audiences": "a" * 501},
            "audiences",
            "Audience #1 must be at most 500 characters long (it has 501).",
        ),
        (
            {"issuer": IDP + "/x", "scopes_push": " ".join(f"s{n}" for n in range(21))},
            "scopes_push",
            "at most 20 scopes for 'push'",
        ),
        ({"issuer": IDP + "/x", "jwks_uri": "ftp://keys"}, "jwks_uri", "Enter a valid URL"),
        ({"issuer": IDP + "/x", "user_claim": "c" * 101}, "user_claim", "at most 100"),
    ]
    for changes, field, words in cases:
        response = client.post(new, form(**changes))
        assert response.status_code == 400, (changes, response.status_code)
        assert words in field_error(response.content.decode(), field), (field, changes)
    assert list(Issuer.objects.values_list("pk", flat=True)) == [registered.pk]


def test_an_owner_edits_an_issuer(client, world, registered):
    client.force_login(world["owner_a"])
    edit = url("issuer-edit", world["a"], registered)
    page = client.get(edit).content.decode()
    assert "api://agents</textarea>" in page and 'value="a2a.read"' in page
    # a refused change keeps the row as it was
    response = client.post(edit, form(audiences="", scopes_read="a2a.read"))
    assert response.status_code == 400 and field_error(response.content.decode(), "audiences")
    registered.refresh_from_db()
    assert registered.audiences == ["api://agents"]
    # a good one is saved
    response = client.post(
        edit,
        form(
            name="",
            audiences="api://other",
            algorithms=["PS256"],
            user_claim="email",
            scopes_read="",
            scopes_cancel="a2a.cancel",
        ),
    )
    assert response.status_code == 302
    registered.refresh_from_db()
    assert registered.name == IDP  # empty: named by its URL
    assert (registered.audiences, registered.algorithms) == (["api://other"], ["PS256"])
    assert registered.user_claim == "email"
    assert registered.scopes == {"send": ["a2a.send", "a2a.write"], "cancel": ["a2a.cancel"]}


def test_an_owner_deactivates_activates_and_deletes_an_issuer(client, world, registered):
    client.force_login(world["owner_a"])
    active = url("issuer-active", world["a"], registered)
    page = client.get(url("issuers", world["a"])).content.decode()
    assert re.search(r'data-confirm="Deactivate Acme staff\?', page)
    assert re.search(r'data-confirm="Delete Acme staff\?', page)
    response = client.post(active, {"active": "false"}, follow=True)
    assert "Issuer Acme staff deactivated" in messages_of(response)[0]
    assert not Issuer.objects.get(pk=registered.pk).is_active
    assert 'data-active="false"' in response.content.decode()
    assert client.post(active, {"active": "maybe"}).status_code == 400
    response = client.post(active, {"active": "true"}, follow=True)
    assert "Issuer Acme staff active" in messages_of(response)[0]
    assert Issuer.objects.get(pk=registered.pk).is_active
    response = client.post(url("issuer-delete", world["a"], registered), follow=True)
    assert "Issuer Acme staff deleted" in messages_of(response)[0]
    assert not Issuer.objects.filter(pk=registered.pk).exists()
    assert 'id="no-issuers"' in response.content.decode()


def test_members_see_but_are_refused_every_change(client, world, registered):
    client.force_login(world["member_a"])
    assert client.get(url("issuers", world["a"])).status_code == 200
    assert client.get(url("issuer-new", world["a"])).status_code == 403
    assert client.post(url("issuer-new", world["a"]), form(issuer=IDP + "/m")).status_code == 403
    for name, data in (
        ("issuer-edit", form(audiences="api://mine")),
        ("issuer-active", {"active": "false"}),
        ("issuer-delete", {}),
        ("issuer-check", {}),
    ):
        response = client.post(url(name, world["a"], registered), data)
        assert response.status_code == 403, name
        assert "Only owners" in response.content.decode()
    stored = Issuer.objects.get(pk=registered.pk)
    assert stored.is_active and stored.audiences == ["api://agents"]
    assert not Issuer.objects.filter(issuer=IDP + "/m").exists()


def test_another_tenants_people_get_404_for_its_page_and_issuers(client, world, registered):
    client.force_login(world["member_b"])
    assert client.get(url("issuers", world["a"])).status_code == 404
    client.force_login(world["owner_b"])
    for name in ("issuer-edit", "issuer-active", "issuer-delete", "issuer-check"):
        # A's issuer, named under B's own tenant too: not found either way
        for tenant in (world["a"], world["b"]):
            response = client.post(url(name, tenant, registered), {"active": "false"})
            assert response.status_code == 404, (name, tenant.slug)
    assert Issuer.objects.get(pk=registered.pk).is_active
    # an id no row can have is not found either, not a database error
    client.force_login(world["owner_a"])
    edit = reverse(
        "console:issuer-edit",
        kwargs={"tenant_slug": world["a"].slug, "issuer_id": 10**20},
    )
    assert client.get(edit).status_code == 404


def test_platform_wide_issuers_are_shown_read_only(client, world):
    platform = issuer_create(
        tenant=None, issuer="https://sso.example.net", audiences=["api://everyone"], name="SSO"
    )
    client.force_login(world["owner_a"])
    page = client.get(url("issuers", world["a"])).content.decode()
    section = re.search(r'<section class="card issuer platform".*?</section>', page, re.S)
    assert section and "https://sso.example.net" in section[0] and "platform-wide" in section[0]
    assert "issuer-check" not in section[0] and "issuer-edit" not in section[0]
    assert "Trusted at every tenant, set by the operator" in page
    # and no tenant route reaches it
    for name in ("issuer-edit", "issuer-active", "issuer-delete", "issuer-check"):
        assert client.post(url(name, world["a"], platform), {"active": "false"}).status_code == 404
    assert Issuer.objects.get(pk=platform.pk).is_active
    # an operator is pointed to the admin
    client.force_login(world["operator"])
    page = client.get(url("issuers", world["a"])).content.decode()
    assert reverse("admin:agents_issuer_changelist") + "?tenant__isnull=True" in page


def test_the_page_shows_an_agents_url_and_its_resource_metadata(client, world, settings):
    client.force_login(world["member_a"])
    page = client.get(url("issuers", world["a"])).content.decode()
    agent_url = f"{settings.A2A_PUBLIC_BASE_URL}/a2a/{world['a'].slug}/alpha/"
    assert f'<code id="resource-url">{agent_url}</code>' in page
    metadata = protected_resource_metadata_url(agent_url)
    assert metadata == (
        f"{settings.A2A_PUBLIC_BASE_URL}/.well-known/oauth-protected-resource/a2a/"
        f"{world['a'].slug}/alpha/"
    )
    assert f'<code id="metadata-url">{metadata}</code>' in page
    assert "The audience is typically the agent's URL" in page


def test_the_tenant_links_to_its_issuers_page(client, world):
    client.force_login(world["member_a"])
    page = client.get(reverse("console:overview")).content.decode()
    assert f'href="{url("issuers", world["a"])}"' in page


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


def test_check_now_says_what_a_token_would_meet_and_the_page_shows_discovery(
    client, world, provider, settings
):
    settings.A2A_IDENTITY_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    issuer = issuer_create(tenant=world["a"], issuer=provider.issuer, audiences=["api://agents"])
    client.force_login(world["owner_a"])
    response = client.post(url("issuer-check", world["a"], issuer), follow=True)
    assert messages_of(response) == [
        f"Issuer {provider.issuer}: 2 keys: RS256, ES256; token endpoint {provider.issuer}/token."
    ]
    page = response.content.decode()
    assert f"token endpoint <code>{provider.issuer}/token</code>" in page
    assert f'<code>{provider.issuer}/keys</code> <span class="muted">(from discovery)' in page
    assert "as read <time datetime=" in page


def test_check_now_names_what_failed(client, world, provider):
    # the SSRF guard refuses the local provider unless the operator allowed its network
    issuer = issuer_create(tenant=world["a"], issuer=provider.issuer, audiences=["api://agents"])
    client.force_login(world["operator"])
    response = client.post(url("issuer-check", world["a"], issuer), follow=True)
    (message,) = messages_of(response)
    assert message.startswith(f"Issuer {provider.issuer}: Discovery document: ")
    assert "may not be fetched" in message and "A2A_IDENTITY_ALLOWED_NETWORKS" in message
    assert response.status_code == 200
