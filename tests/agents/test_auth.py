"""API keys and anonymous callers: who may call, and which owner scope they get."""

from __future__ import annotations

import pytest

from agents.auth import ANONYMOUS_OWNER, authenticate, credentials_from_headers, hash_secret
from agents.errors import AuthenticationRequired
from agents.models import ApiKey
from agents.services import api_key_create


def test_key_is_stored_hashed_and_authenticates_to_its_principal(make_tenant, make_agent):
    tenant = make_tenant()
    agent = make_agent(tenant)
    key, secret = api_key_create(tenant=tenant, name="ci", principal="team-a")
    stored = ApiKey.objects.get(pk=key.pk)
    assert secret not in (stored.secret_hash, stored.prefix) and stored.secret_hash == hash_secret(
        secret
    )
    principal = authenticate(agent=agent, raw_key=secret)
    assert principal.owner == "key:team-a" and not principal.is_tenant_admin
    assert ApiKey.objects.get(pk=key.pk).last_used_at is not None


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s + "x",
        lambda s: s[:-1],
        lambda s: "a2a_deadbeef_" + s.split("_", 2)[2],
        lambda s: "nonsense",
        lambda s: "",
    ],
)
def test_wrong_keys_are_refused(make_tenant, make_agent, mangle):
    tenant = make_tenant()
    agent = make_agent(tenant)
    _, secret = api_key_create(tenant=tenant, name="k")
    with pytest.raises(AuthenticationRequired):
        authenticate(agent=agent, raw_key=mangle(secret) or "x")


def test_keys_do_not_cross_tenants_agents_or_revocation(make_tenant, make_agent):
    from django.utils import timezone

    tenant, other = make_tenant(), make_tenant()
    agent, sibling = make_agent(tenant, "a"), make_agent(tenant, "b")
    foreign_agent = make_agent(other, "a")
    _, secret = api_key_create(tenant=tenant, name="k")
    _, pinned = api_key_create(tenant=tenant, name="p", agent=sibling)
    with pytest.raises(AuthenticationRequired):
        authenticate(agent=foreign_agent, raw_key=secret)
    with pytest.raises(AuthenticationRequired):
        authenticate(agent=agent, raw_key=pinned)
    assert authenticate(agent=sibling, raw_key=pinned).owner == "key:p"
    ApiKey.objects.filter(name="k").update(revoked_at=timezone.now())
    with pytest.raises(AuthenticationRequired):
        authenticate(agent=agent, raw_key=secret)


def test_anonymous_callers_by_visibility_and_scope(make_tenant, make_agent):
    tenant = make_tenant()
    private = make_agent(tenant, "private")
    isolated = make_agent(tenant, "isolated", visibility="public")
    shared = make_agent(tenant, "shared", visibility="public", anonymous_scope="shared")
    with pytest.raises(AuthenticationRequired, match="private"):
        authenticate(agent=private, raw_key=None)
    lonely = authenticate(agent=isolated, raw_key=None)
    assert lonely.owner == ANONYMOUS_OWNER and lonely.is_anonymous and not lonely.can_list
    assert authenticate(agent=shared, raw_key=None).can_list
    with pytest.raises(AuthenticationRequired):
        authenticate(agent=shared, raw_key=None, require_key=True)


def test_credentials_from_headers():
    assert credentials_from_headers({"authorization": "Bearer abc"}) == "abc"
    assert credentials_from_headers({"authorization": "bearer  abc "}) == "abc"
    assert credentials_from_headers({"x-api-key": "xyz"}) == "xyz"
    assert credentials_from_headers({}) is None
    for bad in ("Basic dXNlcjpwYXNz", "Bearer", "Token abc"):
        with pytest.raises(AuthenticationRequired, match="Bearer"):
            credentials_from_headers({"authorization": bad})
