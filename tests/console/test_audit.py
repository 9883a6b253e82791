"""The console's audit log page and its exports: a tenant's people read its log (the addresses
only its owners), operators everything; the filters (tenant, actor, action, object, text, days)
and keyset pages; exports in CSV and JSON Lines of what the filters select, for owners and
operators, with no secret in them."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import models
from django.urls import reverse
from django.utils import timezone

from agents.models import ApiKey
from audit.context import Actor, acting_as
from audit.models import AUTH_FAILURE, AuditEvent
from audit.services import event_record

from .test_agent_pages import agent_url

pytestmark = pytest.mark.django_db

PAGE = reverse("console:audit")
CSV = reverse("console:audit-csv")
JSONL = reverse("console:audit-jsonl")
ADDRESS = "203.0.113.50"


async def _read_all(content) -> bytes:
    return b"".join([chunk async for chunk in content])


def body(response) -> str:
    if response.streaming:
        return async_to_sync(_read_all)(response.streaming_content).decode()
    return response.content.decode()


def rows(page: str) -> list[str]:
    """The events on a page, as their object labels' cells' text."""
    return re.findall(r'<tr class="event" data-event="(\d+)"', page)


@pytest.fixture
def logged(world, client):
    """A key made and revoked by A's owner from ADDRESS (in the console), and an event of B."""
    client.force_login(world["owner_a"])
    client.defaults["REMOTE_ADDR"] = ADDRESS
    client.post(
        agent_url(world["agent_a"], "console:key-create"), {"name": "ci-bot", "this_agent_only": ""}
    )
    page = body(client.get(agent_url(world["agent_a"])))
    secret = re.search(r'id="new-secret">([^<]+)<', page)[1]
    key = ApiKey.objects.get(name="ci-bot")
    client.post(agent_url(world["agent_a"], "console:key-revoke", prefix=key.prefix))
    with acting_as(Actor("user:owner_b", world["owner_b"].pk, "198.51.100.9")):
        event_record(
            tenant_id=world["b"].pk,
            action="update",
            object_type="tenant",
            object_label="b-only-change",
        )
    client.logout()
    return {**world, "key": key, "secret": secret}


def test_owners_see_their_tenants_log_with_the_addresses(client, logged):
    client.force_login(logged["owner_a"])
    page = body(client.get(PAGE))
    assert "ci-bot" in page and "user:owner_a" in page and ADDRESS in page
    assert "revoke" in page and "secret_hash" in page and "••••" in page
    assert "b-only-change" not in page and "198.51.100.9" not in page
    assert logged["secret"] not in page and logged["key"].secret_hash not in page
    assert 'id="export-csv"' in page


def test_members_see_the_log_but_not_where_it_came_from_nor_an_export(client, logged):
    client.force_login(logged["member_a"])
    page = body(client.get(PAGE))
    assert "ci-bot" in page and "user:owner_a" in page
    assert ADDRESS not in page and 'id="export-csv"' not in page
    # nor by searching for it
    assert rows(body(client.get(PAGE, {"q": ADDRESS}))) == []
    for url in (CSV, JSONL):
        refused = client.get(url)
        assert refused.status_code == 403
        assert "owners (or operators) export" in refused.content.decode()


def test_another_tenants_people_see_nothing_of_it(client, logged):
    client.force_login(logged["member_b"])
    page = body(client.get(PAGE))
    assert "b-only-change" in page
    assert "ci-bot" not in page and logged["a"].slug not in page and "owner_a" not in page
    # naming A's tenant is refused without repeating its slug
    page = body(client.get(PAGE, {"tenant": logged["a"].slug}))
    assert "not a tenant you can see" in page and rows(page) == []
    assert logged["a"].slug not in page
    client.force_login(logged["owner_b"])
    export = body(client.get(JSONL))
    assert "b-only-change" in export and "ci-bot" not in export


def test_operators_see_every_tenant_and_the_platforms_own(client, logged):
    client.force_login(logged["operator"])
    page = body(client.get(PAGE))
    assert "ci-bot" in page and "b-only-change" in page and ADDRESS in page
    platform = body(client.get(PAGE, {"tenant": "-"}))
    # the accounts the world made are the platform's: no tenant
    assert "owner_a" in platform and "ci-bot" not in platform


def test_the_filters_narrow_the_log(client, logged):
    client.force_login(logged["owner_a"])

    def labels(**query) -> set[tuple[str, str]]:
        page = body(client.get(PAGE, query))
        found = re.findall(r"<small>(\w+)</small> ([^<]*)", page)
        return {(kind, label.strip()) for kind, label in found}

    assert labels(action="revoke") == {("api_key", f"ci-bot ({logged['key'].prefix}…)")}
    assert ("membership", "owner_a (owner)") in labels(object_type="membership")
    assert labels(object_type="api_key", actor="owner_a") == {
        ("api_key", f"ci-bot ({logged['key'].prefix}…)")
    }
    assert labels(object_type="api_key", actor="system") == set()
    assert labels(q="ci-bot") == {("api_key", f"ci-bot ({logged['key'].prefix}…)")}
    assert labels(q="secret_hash") == {("api_key", f"ci-bot ({logged['key'].prefix}…)")}
    today = timezone.now().date()
    assert labels(since=str(today + timedelta(days=1))) == set()
    assert ("api_key", f"ci-bot ({logged['key'].prefix}…)") in labels(
        since=str(today), until=str(today)
    )


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"action": "explode"}, "Action (action): not an action the log records"),
        ({"since": "yesterday"}, "From (since): Enter a day like 2026-01-31"),
        ({"since": "2026-02-02", "until": "2026-02-01"}, "To (until): must not be before"),
        ({"after": "bm90LWEtdG9rZW4"}, "not a page link this console made"),
    ],
)
def test_a_bad_filter_is_explained_on_the_page(client, logged, query, problem):
    client.force_login(logged["owner_a"])
    page = body(client.get(PAGE, query))
    assert problem in page and rows(page) == []
    if "after" not in query:
        assert client.get(CSV, query).status_code == 400


def test_keyset_pages_newest_first(client, world):
    with acting_as(Actor("user:owner_a")):
        made = [
            event_record(tenant_id=world["a"].pk, action="update", object_type="tenant").pk
            for _ in range(60)
        ]
    # two at the same moment: the id decides
    models.QuerySet.update(AuditEvent.objects.filter(pk__in=made[-3:]), at=timezone.now())
    client.force_login(world["owner_a"])
    first = body(client.get(PAGE, {"actor": "owner_a", "object_type": "tenant"}))
    shown = [int(pk) for pk in rows(first)]
    assert len(shown) == 50 and shown == sorted(shown, reverse=True)
    after = re.search(r'id="next-page" class="button" href="\?([^"]+)"', first)[1]
    second = body(client.get(PAGE + "?" + after.replace("&amp;", "&")))
    rest = [int(pk) for pk in rows(second)]
    assert sorted(shown + rest) == sorted(made) and 'id="next-page"' not in second


def test_refused_credentials_show_their_count_and_reason(client, world):
    from audit.failures import FailureBuffer

    buffer = FailureBuffer(background=False)
    for n in range(40):
        buffer.refused(world["a"].pk, world["agent_a"].pk, "unknown API key", f"192.0.2.{n}")
    assert buffer.flush()
    client.force_login(world["owner_a"])
    page = body(client.get(PAGE, {"action": AUTH_FAILURE}))
    assert '<b class="count">40</b> refused' in page and "unknown API key" in page
    assert f"{world['a'].slug}/alpha" in page and "192.0.2.0" in page
    client.force_login(world["member_a"])
    page = body(client.get(PAGE, {"action": AUTH_FAILURE}))
    assert '<b class="count">40</b> refused' in page and "192.0.2.0" not in page


def test_the_exports_hold_what_the_filters_select_and_no_secret(client, logged):
    client.force_login(logged["owner_a"])
    response = client.get(CSV, {"object_type": "api_key"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    text = body(response)
    records = list(csv.DictReader(io.StringIO(text)))
    assert [(r["action"], r["object_type"]) for r in records] == [
        ("revoke", "api_key"),
        ("create", "api_key"),
    ]
    created = records[1]
    assert (created["tenant"], created["actor"], created["source"]) == (
        logged["a"].slug,
        "user:owner_a",
        ADDRESS,
    )
    assert json.loads(created["changes"])["secret_hash"] == [None, "••••"]

    lines = body(client.get(JSONL)).splitlines()
    parsed = [json.loads(line) for line in lines]
    assert {p["tenant"] for p in parsed} == {logged["a"].slug}
    assert any(p["object"].startswith("ci-bot") and p["action"] == "revoke" for p in parsed)
    for export in (text, "\n".join(lines)):
        assert logged["secret"] not in export and logged["key"].secret_hash not in export


def test_a_long_export_is_read_a_page_at_a_time(client, world):
    with acting_as(Actor("user:owner_a")):
        for n in range(2100):
            event_record(
                tenant_id=world["a"].pk, action="update", object_type="tenant", object_id=str(n)
            )
    client.force_login(world["owner_a"])
    lines = body(client.get(JSONL, {"actor": "owner_a"})).splitlines()
    ids = [json.loads(line)["object_id"] for line in lines]
    assert len(ids) == 2100 and ids[0] == "2099" and ids[-1] == "0"


def test_a_spreadsheet_formula_in_a_name_is_exported_as_text(client, world):
    with acting_as(Actor("user:owner_a")):
        event_record(
            tenant_id=world["a"].pk, action="create", object_type="api_key", object_label="=1+1"
        )
    client.force_login(world["owner_a"])
    text = body(client.get(CSV, {"object_type": "api_key"}))
    assert next(csv.DictReader(io.StringIO(text)))["object"] == "'=1+1"
