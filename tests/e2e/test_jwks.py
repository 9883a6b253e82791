"""The push-signing JWKS over real HTTP: the platform-wide set and each tenant's."""

from __future__ import annotations

import pytest

from agents.selectors import jwks_for
from agents.services import signing_key_active
from agents.signing import push_signature, push_signature_verify

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_both_jwks_urls_are_served_with_caching_headers(http, live_platform, make_tenant):
    acme, globex = make_tenant(), make_tenant()
    acme_kid = signing_key_active(tenant=acme).kid
    globex_kid = signing_key_active(tenant=globex).kid

    platform_wide = http.get(f"{live_platform.url}/.well-known/jwks.json")
    per_tenant = http.get(f"{live_platform.url}/a2a/{acme.slug}/.well-known/jwks.json")

    for response in (platform_wide, per_tenant):
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        assert response.headers["Cache-Control"] == "public, max-age=300"
    assert {acme_kid, globex_kid} <= {k["kid"] for k in platform_wide.json()["keys"]}
    assert per_tenant.json() == jwks_for(tenant=acme)
    assert [k["kid"] for k in per_tenant.json()["keys"]] == [acme_kid]
    # What a receiver fetches verifies what the platform signs.
    body = b'{"task": {"id": "task-1"}}'
    token = push_signature(tenant=acme, body=body, task_id="task-1")
    push_signature_verify(token, body, per_tenant.json(), task_id="task-1")


def test_an_unknown_tenant_is_404_json(http, live_platform):
    response = http.get(f"{live_platform.url}/a2a/no-such-tenant/.well-known/jwks.json")
    assert response.status_code == 404
    assert response.json()["error"] == "tenant_not_found"
