"""What the console's page tests share: two tenants and the people in them (the one `world`)."""

from __future__ import annotations

from functools import cache

import pytest
from django.contrib.auth.hashers import make_password

from agents.models import Membership

PASSWORD = "pw"


@cache
def _password_hash() -> str:
    # Hashed once: each hash takes the hasher's full work (most of a second), and every test
    # of the console makes five accounts.
    return make_password(PASSWORD)


@pytest.fixture
def world(db, make_tenant, make_agent, django_user_model):
    """Tenants A and B with an agent each (`alpha`, `beta`); an owner and a member of each, and
    an operator (staff, no membership); each account's password is PASSWORD."""
    a, b = make_tenant(), make_tenant()
    agent_a, agent_b = make_agent(a, "alpha"), make_agent(b, "beta")
    users = {}
    for name, tenant, role in (
        ("owner_a", a, "owner"),
        ("member_a", a, "member"),
        ("owner_b", b, "owner"),
        ("member_b", b, "member"),
    ):
        users[name] = django_user_model.objects.create(username=name, password=_password_hash())
        Membership.objects.create(user=users[name], tenant=tenant, role=role)
    users["operator"] = django_user_model.objects.create(
        username="operator", password=_password_hash(), is_staff=True
    )
    return {"a": a, "b": b, "agent_a": agent_a, "agent_b": agent_b, **users}
