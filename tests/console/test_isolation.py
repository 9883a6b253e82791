"""A tenant member reaches nothing of another tenant through any console page or URL.

Every route of the console is listed here with the URL of an object of tenant A. Each is first
shown to be real: tenant A's owner gets the page (200, after the redirect a POST answers with).
Then an owner of tenant B gets 404 for it (the same answer as for something that does not
exist), a member of A gets the page (where members act too, the owner's answer) or, for
owner-only actions, 403, and filters naming A's agent show B nothing. A console route missing
from the table fails the test, so a new page cannot skip the check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from a2a.types import TaskState
from asgiref.sync import async_to_sync
from django.contrib.admin.models import LogEntry
from django.db import transaction
from django.http import HttpResponse
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from agents.auth import Principal
from agents.models import Membership
from agents.services import api_key_create, issuer_create
from push_app.models import Delivery, DeliveryAttempt, PushConfig
from tests.factories import task_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def scene(world, make_agent):
    """The console's `world` (conftest.py), and an object of tenant A of every kind a console
    URL names: its agent `secret-agent` with a key and a completed task, whose push delivery
    died; the membership of A's member."""
    a = world["a"]
    agent = make_agent(a, "secret-agent")
    # Made in one transaction: where the scene is committed (OPERATION_ROUTES), a worker of the
    # session's live platform hears of the task's run at the commit only, and finds it over.
    with transaction.atomic():
        task = task_create(
            agent,
            state=TaskState.TASK_STATE_COMPLETED,
            context_id="ctx-of-a",
            principal=Principal(owner="owner-of-a"),
        )
    event = task.events.order_by("-seq").first()
    config = PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/hook")
    delivery = Delivery.objects.create(
        config=config,
        event=event,
        seq=event.seq,
        state=Delivery.State.DEAD,
        attempts=1,
        last_status_code=500,
        next_attempt_at=timezone.now(),
    )
    DeliveryAttempt.objects.create(
        delivery=delivery, started_at=timezone.now(), status_code=500, latency_ms=7, outcome="dead"
    )
    key = api_key_create(tenant=a, name="key-of-a", agent=agent)[0]
    # An issuer the SSRF guard refuses at once (loopback): "Check now" fails without waiting.
    issuer = issuer_create(tenant=a, issuer="http://127.0.0.1:9/realms/a", audiences=["api://a"])
    return {
        **world,
        "agent": agent,
        "task": task,
        "delivery": delivery,
        "key": key,
        "issuer": issuer,
        "membership": Membership.objects.get(tenant=a, user=world["member_a"]),
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
    "limits": (
        lambda w: reverse("console:limits", kwargs={"tenant_slug": w["a"].slug}),
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
    "task-cancel": (
        lambda w: reverse(
            "console:task-cancel", kwargs={"tenant_slug": w["a"].slug, "task_id": w["task"].pk}
        ),
        ("post",),
    ),
    "task-reply": (
        lambda w: reverse(
            "console:task-reply", kwargs={"tenant_slug": w["a"].slug, "task_id": w["task"].pk}
        ),
        ("post",),
    ),
    "agent-try": (lambda w: reverse("console:agent-try", kwargs=_kw(w)), ("post",)),
    "delivery": (
        lambda w: reverse("console:delivery", kwargs={"delivery_id": w["delivery"].pk}),
        ("get",),
    ),
    "delivery-redeliver": (
        lambda w: reverse("console:delivery-redeliver", kwargs={"delivery_id": w["delivery"].pk}),
        ("post",),
    ),
    "usage": (lambda w: reverse("console:usage", kwargs={"tenant_slug": w["a"].slug}), ("get",)),
    "issuers": (
        lambda w: reverse("console:issuers", kwargs={"tenant_slug": w["a"].slug}),
        ("get",),
    ),
    "issuer-new": (
        lambda w: reverse("console:issuer-new", kwargs={"tenant_slug": w["a"].slug}),
        ("get", "post"),
    ),
    **{
        name: (
            lambda w, name=name: reverse(
                f"console:{name}",
                kwargs={"tenant_slug": w["a"].slug, "issuer_id": w["issuer"].pk},
            ),
            methods,
        )
        for name, methods in (
            ("issuer-edit", ("get", "post")),
            ("issuer-active", ("post",)),
            ("issuer-delete", ("post",)),
            ("issuer-check", ("post",)),
        )
    },
    "usage-csv": (
        lambda w: reverse("console:usage-csv", kwargs={"tenant_slug": w["a"].slug}),
        ("get",),
    ),
    "usage-json": (
        lambda w: reverse("console:usage-json", kwargs={"tenant_slug": w["a"].slug}),
        ("get",),
    ),
}
LIST_ROUTES = {
    "overview",
    "tasks",
    "deliveries",
    "charts",
    "usage-index",
    "audit",
    "audit-csv",
    "audit-jsonl",
}
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
    "task-cancel",
    "task-reply",
    "usage-csv",
    "usage-json",
    "issuer-new",
    "issuer-edit",
    "issuer-active",
    "issuer-delete",
    "issuer-check",
}


# What a POST sends: what the owner's request needs to succeed, and what another tenant's must
# then fail to do. (agent-new and agent-edit with nothing posted render their form again.)
POST_DATA: dict[str, dict[str, str]] = {
    "agent-active": {"active": "false"},
    "agent-delete": {"confirm_slug": "secret-agent"},
    "agent-test-connection": {},
    "person-add": {"username": "newcomer", "email": "newcomer@example.org", "role": "member"},
    "person-role": {"role": "owner"},
    "key-create": {"name": "another key"},
    **{
        name: {
            "issuer": "https://login.example.com/realms/other",
            "audiences": "api://other",
            "algorithms": "RS256",
        }
        for name in ("issuer-new", "issuer-edit")
    },
    "issuer-active": {"active": "false"},
}


# POSTs that A's owner is refused for a reason of the action's own, which the answer names: the
# view found A's object and looked at it (an active agent is not deleted; an echo agent reaches
# no outside service to test). Every other request of A's owner ends on a page (200).
OWNER_REFUSED: dict[str, tuple[int, str]] = {
    "agent-delete": (400, "is active: disable it first"),
    "agent-test-connection": (400, "reaches no outside service"),
    # A's task is completed; the posts here carry a form, where the page's scripts send JSON.
    "task-cancel": (400, "is already TASK_STATE_COMPLETED"),
    "task-reply": (415, "Send the message as JSON"),
    "agent-try": (415, "Send the message as JSON"),
}
# Routes whose owner's request reaches an A2A operation, which reads on a database connection
# of its own (a2a_platform.db): their scene is committed for it to see.
OPERATION_ROUTES = {"task-cancel"}


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


def _as_owner(client: Client, method: str, url: str, data: dict[str, str]) -> HttpResponse:
    """What A's owner ends on at `url`: its page, or the page a POST redirects to. What the
    request changes is rolled back, so that what follows sees A's objects as they were."""
    with transaction.atomic():
        response = getattr(client, method)(url, data, follow=True)
        transaction.set_rollback(True)
    return response


@pytest.mark.parametrize(
    "route",
    [
        pytest.param(r, marks=pytest.mark.django_db(transaction=True))
        if r in OPERATION_ROUTES
        else r
        for r in sorted(OBJECT_ROUTES)
    ],
)
def test_another_tenants_object_is_404_on_every_route(client, scene, route):
    url_of, methods = OBJECT_ROUTES[route]
    url, data = url_of(scene), POST_DATA.get(route, {})
    # The URL is real: A's owner gets the page, so the 404s below are the scoping, not a typo.
    client.force_login(scene["owner_a"])
    for method in methods:
        answer = _as_owner(client, method, url, data if method == "post" else {})
        status, reason = (200, "") if method == "get" else OWNER_REFUSED.get(route, (200, ""))
        assert answer.status_code == status, (method, url, answer.status_code)
        if reason:
            assert reason in answer.content.decode(), (method, url, reason)
    client.force_login(scene["owner_b"])
    for method in methods:
        response = getattr(client, method)(url, data if method == "post" else {})
        assert response.status_code == 404, (method, url, response.status_code)
    client.force_login(scene["member_a"])
    response = client.get(url) if "get" in methods else client.post(url)
    if route in OWNER_REFUSED and route not in OWNER_ONLY:  # members act too: as the owner
        assert response.status_code == OWNER_REFUSED[route][0], (url, response.status_code)
    else:
        assert response.status_code in (200, 403), (url, response.status_code)
    if response.status_code == 403:  # owner-only actions: A's member is refused, not 404
        assert route in OWNER_ONLY
    scene["key"].refresh_from_db()
    assert scene["key"].revoked_at is None
    scene["delivery"].refresh_from_db()
    assert scene["delivery"].state == Delivery.State.DEAD
    scene["agent"].refresh_from_db()
    assert scene["agent"].is_active and scene["agent"].name == "Secret-Agent"
    assert Membership.objects.filter(pk=scene["membership"].pk, role="member").exists()
    scene["task"].refresh_from_db()
    assert scene["task"].state == "TASK_STATE_COMPLETED"
    scene["issuer"].refresh_from_db()
    assert scene["issuer"].is_active and scene["issuer"].audiences == ["api://a"]
    assert not LogEntry.objects.filter(object_id=str(scene["task"].pk)).exists()  # nothing done


@pytest.mark.parametrize("route", sorted(LIST_ROUTES))
def test_lists_and_filters_show_nothing_of_another_tenant(client, scene, route):
    url = reverse(f"console:{route}")
    a = scene["a"].slug
    leaks = [a, scene["agent"].slug, str(scene["task"].pk), "ctx-of-a", "owner-of-a"]
    queries = ({}, {"agent": f"{a}/{scene['agent'].slug}"}, {"tenant": a})
    # Each page, with each filter, shows A's agent to A's owner: what B must not see is there.
    client.force_login(scene["owner_a"])
    for query in queries:
        page = client.get(url, query)
        assert page.status_code == 200, (route, query, page.status_code)
        assert scene["agent"].slug in _body(page), (route, query)
    client.force_login(scene["owner_b"])
    for query in queries:
        page = client.get(url, query)
        # an export answers a filter naming A's tenant 400, naming the field, not the tenant
        assert page.status_code in (200, 400, 404)
        body = _body(page)
        assert not [leak for leak in leaks if leak in body], (route, query)


async def _read_all(content: Any) -> bytes:
    return b"".join([chunk async for chunk in content])


def _body(response: HttpResponse) -> str:
    """A page's text, or an export's (streamed a page of rows at a time)."""
    if response.streaming:
        return async_to_sync(_read_all)(response.streaming_content).decode()
    return response.content.decode()


def test_operator_pages_are_refused_to_members(client, scene):
    client.force_login(scene["member_a"])
    assert client.get(reverse("console:workers")).status_code == 403
    assert (
        client.post(reverse("console:job-revoke"), {"job": str(scene["task"].pk)}).status_code
        == 403
    )
    admin = client.get("/admin/")
    assert admin.status_code == 302 and "/admin/login/" in admin["Location"]


@pytest.mark.parametrize("route", ["deliveries", "charts", "tasks"])
@pytest.mark.parametrize("value", ["a\x00/b", "../x", "x", "/", "A/B"])
def test_a_malformed_agent_filter_is_a_clear_answer_not_a_500(client, scene, route, value):
    client.force_login(scene["owner_b"])
    response = client.get(reverse(f"console:{route}"), {"agent": value})
    assert response.status_code in (200, 404)
    if response.status_code == 200:  # the task list names the bad field on the page
        assert "not an agent you can see" in response.content.decode()
