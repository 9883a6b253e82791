"""A tenant member reaches nothing of another tenant through any console page or URL.

Every route of the console is listed here with the URL of an object of tenant A. A member of
tenant B gets 404 for each (the same answer as for something that does not exist), a member of
A gets the page, and filters naming A's agent show B nothing. A console route missing from the
table fails the test, so a new page cannot skip the check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from agents.models import Membership
from agents.services import api_key_create
from push_app.models import Delivery, DeliveryAttempt, PushConfig
from tasks_app.models import Task, TaskEvent

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_tenant, make_agent, django_user_model):
    a, b = make_tenant(), make_tenant()
    agent = make_agent(a, "secret-agent")
    make_agent(b, "other")
    task = Task.objects.create(
        tenant=a,
        agent=agent,
        context_id="ctx-of-a",
        owner="owner-of-a",
        state="TASK_STATE_COMPLETED",
        status_timestamp=timezone.now(),
        last_seq=1,
    )
    event = TaskEvent.objects.create(
        task=task, seq=1, kind="status_update", state=task.state, data={}
    )
    config = PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/hook")
    delivery = Delivery.objects.create(
        config=config,
        event=event,
        seq=1,
        state=Delivery.State.DEAD,
        attempts=1,
        last_status_code=500,
        next_attempt_at=timezone.now(),
    )
    DeliveryAttempt.objects.create(
        delivery=delivery, started_at=timezone.now(), status_code=500, latency_ms=7, outcome="dead"
    )
    key = api_key_create(tenant=a, name="key-of-a", agent=agent)[0]
    users, memberships = {}, {}
    for name, tenant in (("member_a", a), ("owner_b", b)):
        users[name] = django_user_model.objects.create_user(name, password="pw")
        role = "member" if tenant == a else "owner"  # B's most powerful role
        memberships[name] = Membership.objects.create(user=users[name], tenant=tenant, role=role)
    return {
        "a": a,
        "agent": agent,
        "task": task,
        "delivery": delivery,
        "key": key,
        "membership": memberships["member_a"],
        **users,
    }


def _kw(w: dict[str, Any]) -> dict[str, str]:
    return {"tenant_slug": w["a"].slug, "agent_slug": w["agent"].slug}


# route name -> (URL of tenant A's object, methods to try). Routes with no tenant object (lists,
# the charts) are checked by their filters below; staff-only routes by test_operator_pages.
OBJECT_ROUTES: dict[str, tuple[Callable[[dict[str, Any]], str], tuple[str, ...]]] = {
    "agent": (lambda w: reverse("console:agent", kwargs=_kw(w)), ("get",)),
    "agent-new": (
        lambda w: reverse("console:agent-new", kwargs={"tenant_slug": w["a"].slug}),
        ("get", "post"),
    ),
    "agent-edit": (lambda w: reverse("console:agent-edit", kwargs=_kw(w)), ("get", "post")),
    "agent-active": (lambda w: reverse("console:agent-active", kwargs=_kw(w)), ("post",)),
    "agent-delete": (lambda w: reverse("console:agent-delete", kwargs=_kw(w)), ("get", "post")),
    # (The same name without the agent, for an agent not yet saved, is checked by
    # tests/console/test_agent_kinds.py.)
    "agent-test-connection": (
        lambda w: reverse("console:agent-test-connection", kwargs=_kw(w)),
        ("post",),
    ),
    "people": (
        lambda w: reverse("console:people", kwargs={"tenant_slug": w["a"].slug}),
        ("get",),
    ),
    "person-add": (
        lambda w: reverse("console:person-add", kwargs={"tenant_slug": w["a"].slug}),
        ("post",),
    ),
    "person-role": (
        lambda w: reverse(
            "console:person-role",
            kwargs={"tenant_slug": w["a"].slug, "membership_id": w["membership"].pk},
        ),
        ("post",),
    ),
    "person-remove": (
        lambda w: reverse(
            "console:person-remove",
            kwargs={"tenant_slug": w["a"].slug, "membership_id": w["membership"].pk},
        ),
        ("post",),
    ),
    "key-create": (lambda w: reverse("console:key-create", kwargs=_kw(w)), ("post",)),
    "key-revoke": (
        lambda w: reverse("console:key-revoke", kwargs={**_kw(w), "prefix": w["key"].prefix}),
        ("post",),
    ),
    "task": (
        lambda w: reverse(
            "console:task", kwargs={"tenant_slug": w["a"].slug, "task_id": w["task"].pk}
        ),
        ("get",),
    ),
    "task-events": (
        lambda w: reverse(
            "console:task-events", kwargs={"tenant_slug": w["a"].slug, "task_id": w["task"].pk}
        ),
        ("get",),
    ),
    "delivery": (
        lambda w: reverse("console:delivery", kwargs={"delivery_id": w["delivery"].pk}),
        ("get",),
    ),
    "delivery-redeliver": (
        lambda w: reverse("console:delivery-redeliver", kwargs={"delivery_id": w["delivery"].pk}),
        ("post",),
    ),
}
LIST_ROUTES = {"overview", "tasks", "deliveries", "charts"}
OPERATOR_ROUTES = {"workers", "job-revoke"}
# login, logout, and the page an invited person sets a password on (a signed, one-time link
# for one account: it names no tenant).
ACCOUNT_ROUTES = {"login", "logout", "welcome"}
OWNER_ONLY = {
    "agent-new",
    "agent-edit",
    "agent-active",
    "agent-delete",
    "agent-test-connection",
    "person-add",
    "person-role",
    "person-remove",
    "key-create",
    "key-revoke",
    "delivery-redeliver",
}


def _console_route_names() -> set[str]:
    def walk(patterns: list, namespace: str) -> set[str]:
        names: set[str] = set()
        for p in patterns:
            if isinstance(p, URLResolver):
                names |= walk(p.url_patterns, p.namespace or namespace)
            elif isinstance(p, URLPattern) and namespace == "console" and p.name:
                names.add(p.name)
        return names

    return walk(get_resolver().url_patterns, "")


def test_every_console_route_has_an_isolation_case():
    known = set(OBJECT_ROUTES) | LIST_ROUTES | OPERATOR_ROUTES | ACCOUNT_ROUTES
    assert _console_route_names() == known


@pytest.mark.parametrize("route", sorted(OBJECT_ROUTES))
def test_another_tenants_object_is_404_on_every_route(client, world, route):
    url_of, methods = OBJECT_ROUTES[route]
    url = url_of(world)
    client.force_login(world["owner_b"])
    for method in methods:
        response = getattr(client, method)(url)
        assert response.status_code == 404, (method, url, response.status_code)
    # The same URL is real for a member of A: the 404 above is the scoping, not a typo.
    client.force_login(world["member_a"])
    response = client.get(url) if "get" in methods else client.post(url)
    assert response.status_code in (200, 403), (url, response.status_code)
    if response.status_code == 403:  # owner-only actions: A's member is refused, not 404
        assert route in OWNER_ONLY
    world["key"].refresh_from_db()
    assert world["key"].revoked_at is None
    world["delivery"].refresh_from_db()
    assert world["delivery"].state == Delivery.State.DEAD
    world["agent"].refresh_from_db()
    assert world["agent"].is_active and world["agent"].name == "Secret-Agent"
    assert Membership.objects.filter(pk=world["membership"].pk, role="member").exists()


@pytest.mark.parametrize("route", sorted(LIST_ROUTES))
def test_lists_and_filters_show_nothing_of_another_tenant(client, world, route):
    url = reverse(f"console:{route}")
    a = world["a"].slug
    leaks = [a, world["agent"].slug, str(world["task"].pk), "ctx-of-a", "owner-of-a"]
    client.force_login(world["owner_b"])
    for query in ({}, {"agent": f"{a}/{world['agent'].slug}"}, {"tenant": a}):
        page = client.get(url, query)
        assert page.status_code in (200, 404)
        body = page.content.decode()
        assert not [leak for leak in leaks if leak in body], (route, query)
    client.force_login(world["member_a"])
    body = client.get(url).content.decode()
    assert world["agent"].slug in body or world["a"].slug in body or route == "charts"


def test_operator_pages_are_refused_to_members(client, world):
    client.force_login(world["member_a"])
    assert client.get(reverse("console:workers")).status_code == 403
    assert (
        client.post(reverse("console:job-revoke"), {"job": str(world["task"].pk)}).status_code
        == 403
    )
    admin = client.get("/admin/")
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]


@pytest.mark.parametrize("route", ["deliveries", "charts", "tasks"])
@pytest.mark.parametrize("value", ["a\x00/b", "../x", "x", "/", "A/B"])
def test_a_malformed_agent_filter_is_a_clear_answer_not_a_500(client, world, route, value):
    client.force_login(world["owner_b"])
    response = client.get(reverse(f"console:{route}"), {"agent": value})
    assert response.status_code in (200, 404)
    if response.status_code == 200:  # the task list names the bad field on the page
        assert "not an agent you can see" in response.content.decode()
