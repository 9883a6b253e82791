"""Token issuers in the admin: added and changed with the JSON fields as JSON, every refusal on
the field it is about (a bad algorithm, no audience, an issuer registered twice), what
discovery said read-only and dropped with a new issuer URL, and the action that checks the
selected issuers now against a real local OpenID provider (tests/e2e/oidc_provider.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agents.models import Issuer
from agents.services import issuer_create
from tests.e2e.oidc_provider import Provider

from .test_admin_plans import field_errors

ADD = "/admin/agents/issuer/add/"
LIST = "/admin/agents/issuer/"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    return client


def change_url(issuer: Issuer) -> str:
    return f"/admin/agents/issuer/{issuer.pk}/change/"


def issuer_form(tenant: Any, **changes: Any) -> dict[str, Any]:
    form = {
        "tenant": tenant.pk if tenant else "",
        "name": "Okta (staff)",
        "issuer": "https://login.example.com/oauth2/default",
        "jwks_uri": "",
        "audiences": '["api://agents"]',
        "algorithms": '["RS256"]',
        "user_claim": "sub",
        "scopes": '{"send": ["a2a.send"]}',
        "is_active": "on",
    }
    form.update(changes)
    return {name: value for name, value in form.items() if value is not None}


def test_an_operator_adds_a_tenants_issuer_and_a_platform_wide_one(admin_client, make_tenant):
    tenant = make_tenant()
    response = admin_client.post(ADD, issuer_form(tenant))
    assert response.status_code == 302, response.content[:3000]
    issuer = Issuer.objects.get(tenant=tenant)
    assert issuer.audiences == ["api://agents"] and issuer.algorithms == ["RS256"]
    assert issuer.scopes == {"send": ["a2a.send"]} and issuer.is_active
    # the same issuer platform-wide is another registration
    response = admin_client.post(ADD, issuer_form(None, name="Everyone"))
    assert response.status_code == 302, response.content[:3000]
    assert Issuer.objects.get(tenant__isnull=True).name == "Everyone"
    listing = admin_client.get(LIST).content.decode()
    assert "Okta (staff)" in listing and tenant.slug in listing and "(platform-wide)" in listing
    only_platform = admin_client.get(LIST, {"tenant__isnull": "True"}).content.decode()
    assert "Everyone" in only_platform and "Okta (staff)" not in only_platform


@pytest.mark.parametrize(
    "changes, field, words",
    [
        ({"algorithms": '["HS256"]'}, "algorithms", "Not an accepted token algorithm: HS256"),
        ({"algorithms": "RS256"}, "algorithms", "Not valid JSON."),
        ({"audiences": "[]"}, "audiences", "This field is required."),
        ({"audiences": '[" "]'}, "audiences", "List at least one accepted audience"),
        ({"audiences": '["a\\u0000"]'}, "audiences", "must not contain the character U+0000"),
        ({"scopes": '{"write": ["x"]}'}, "scopes", "Not an operation: write"),
        ({"scopes": '{"send": "a2a.send"}'}, "scopes", "must be a list of scope names"),
        ({"issuer": "not a URL"}, "issuer", "Enter a valid URL."),
    ],
)
def test_a_refused_value_is_said_on_its_field(admin_client, make_tenant, changes, field, words):
    tenant = make_tenant()
    response = admin_client.post(ADD, issuer_form(tenant, **changes))
    assert response.status_code == 200
    assert any(words in error for error in field_errors(response, field)), field_errors(
        response, field
    )
    assert not Issuer.objects.exists()


def test_an_issuer_registered_twice_is_refused_on_the_issuer_field(admin_client, make_tenant):
    tenant = make_tenant()
    issuer_create(tenant=tenant, issuer="https://login.example.com/oauth2/default", audiences=["x"])
    issuer_create(tenant=None, issuer="https://login.example.com/oauth2/default", audiences=["x"])
    for whose, words in ((tenant, f"tenant {tenant.slug}"), (None, "platform-wide")):
        response = admin_client.post(ADD, issuer_form(whose))
        assert response.status_code == 200
        assert field_errors(response, "issuer") == [f"This issuer is already registered {words}."]
    assert Issuer.objects.count() == 2


def test_a_change_shows_discovery_read_only_and_a_new_url_drops_it(admin_client, make_tenant):
    tenant = make_tenant()
    issuer = issuer_create(
        tenant=tenant, issuer="https://login.example.com/oauth2/default", audiences=["api://a"]
    )
    said = {"jwks_uri": "https://login.example.com/keys", "read_at": "2026-12-01T10:00:00+00:00"}
    Issuer.objects.filter(pk=issuer.pk).update(discovered=said)
    page = admin_client.get(change_url(issuer)).content.decode()
    assert "https://login.example.com/keys" in page and 'name="discovered"' not in page
    # a change that keeps the URL keeps what discovery said, whatever is posted for it
    form = issuer_form(tenant, audiences='["api://a", "api://b"]', discovered="{}")
    assert admin_client.post(change_url(issuer), form).status_code == 302
    issuer.refresh_from_db()
    assert issuer.audiences == ["api://a", "api://b"] and issuer.discovered == said
    # a new issuer URL drops it: it was said of the old one
    form = issuer_form(tenant, issuer="https://login.example.com/oauth2/other")
    assert admin_client.post(change_url(issuer), form).status_code == 302
    issuer.refresh_from_db()
    assert issuer.discovered == {}


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


def test_the_action_checks_the_selected_issuers_now(admin_client, make_tenant, provider, settings):
    settings.A2A_IDENTITY_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    good = issuer_create(tenant=make_tenant(), issuer=provider.issuer, audiences=["api://a"])
    bad = issuer_create(tenant=None, issuer=provider.issuer + "/nothing", audiences=["api://a"])
    response = admin_client.post(
        LIST,
        {"action": "check_now", "_selected_action": [good.pk, bad.pk]},
        follow=True,
    )
    said = {str(m) for m in response.context["messages"]}
    assert f"{good}: 2 keys: RS256, ES256; token endpoint {provider.issuer}/token." in said
    assert any(
        m.startswith(f"{bad}: Discovery document: ") and "answered HTTP 404" in m for m in said
    ), said
    good.refresh_from_db()
    assert good.discovered["token_endpoint"] == f"{provider.issuer}/token"
    # and the change page shows it
    page = admin_client.get(change_url(good)).content.decode()
    assert f"&quot;token_endpoint&quot;: &quot;{provider.issuer}/token&quot;" in page
