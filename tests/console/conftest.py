"""What the console's page tests share: two tenants and the people in them."""

from __future__ import annotations

import pytest

from agents.models import Membership


@pytest.fixture
def world(db, make_tenant, make_agent, django_user_model):
    """Tenants A and B with an agent each; an owner and a member of A, a member of B, and an
    operator (staff, no membership)."""
    a, b = make_tenant(), make_tenant()
    agent_a, agent_b = make_agent(a, "alpha"), make_agent(b, "beta")
    users = {}
    for name, tenant, role in (
        ("owner_a", a, "owner"),
        ("member_a", a, "member"),
        ("member_b", b, "member"),
    ):
        users[name] = django_user_model.objects.create_user(name, password="pw")
        Membership.objects.create(user=users[name], tenant=tenant, role=role)
    users["operator"] = django_user_model.objects.create_user(
        "operator", password="pw", is_staff=True
    )
    return {"a": a, "b": b, "agent_a": agent_a, "agent_b": agent_b, **users}
