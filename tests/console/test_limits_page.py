"""The console's limits page of a tenant: every limit in effect (agents.cache.tenant_limits) with
where it comes from (the tenant's plan, the operator's default plan, the tenant's own override,
or nothing), the agents' and keys' own overrides; seen by everyone in the tenant and by
operators, 404 to anyone else; nobody changes a limit there.

(tests/console/test_limits.py is about the bounds of the console's requests.)"""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from agents import plans
from agents.models import Plan
from agents.services import api_key_create

pytestmark = pytest.mark.django_db


def limits_url(tenant) -> str:
    return reverse("console:limits", kwargs={"tenant_slug": tenant.slug})


def tenant_rows(page: str) -> dict[str, tuple[int, str]]:
    """limit name -> (value in effect, where it comes from), as the page's table says."""
    rows = re.findall(
        r'<tr class="limit" data-limit="(\w+)" data-value="(\d+)" data-source="([\w-]+)">', page
    )
    return {name: (int(value), source) for name, value, source in rows}


def holder_cells(page: str, attribute: str, name: str) -> dict[str, tuple[int, bool]]:
    """limit name -> (value, whether it is the holder's own) of one agent (`data-agent`) or
    key (`data-key`) row."""
    row = re.search(rf'<tr class="holder" {attribute}="{re.escape(name)}">(.*?)</tr>', page, re.S)
    assert row, f"no row {attribute}={name}"
    cells = re.findall(r'data-limit="(\w+)" data-value="(\d+)" data-own="(true|false)"', row[1])
    return {limit: (int(value), own == "true") for limit, value, own in cells}


@pytest.fixture
def limited(world, make_agent):
    """Tenant A on a plan, with two overrides of its own; its agent `alpha` with its own runs at
    once and a second agent without; a key with its own rate and one without."""
    plan = Plan.objects.create(
        name="team-x",
        description="For the team.",
        weight=2,
        requests_per_second=10,
        running_runs=3,
        agent_running_runs=2,
        runs_per_day=100,
        key_requests_per_second=4,
    )
    a = world["a"]
    a.plan, a.limits = plan, {"runs_per_day": 0, "queued_runs": 40}
    a.save()
    world["agent_a"].limits = {"agent_running_runs": 1}
    world["agent_a"].save()
    make_agent(a, "plain")
    batch = api_key_create(tenant=a, name="batch")[0]
    batch.limits = {"key_requests_per_second": 9}  # as the key's admin page sets it
    batch.save()
    api_key_create(tenant=a, name="ordinary")
    return {**world, "plan": plan}


def test_the_owner_sees_every_limit_in_effect_and_where_it_comes_from(client, limited):
    client.force_login(limited["owner_a"])
    response = client.get(limits_url(limited["a"]))
    assert response.status_code == 200
    page = unescape(response.content.decode())
    rows = tenant_rows(page)
    assert list(rows) == list(plans.NAMES)  # every limit, in the table's order
    assert rows["requests_per_second"] == (10, "plan")
    assert rows["running_runs"] == (3, "plan")
    assert rows["runs_per_day"] == (0, "tenant")  # the plan's 100, lifted for this tenant
    assert rows["queued_runs"] == (40, "tenant")
    assert rows["stored_tasks"] == (0, "plan")
    # shown as a person reads them: the plan's name, "unlimited" for 0, the plan's own value
    assert "<b>team-x</b>" in page and "For the team." in page and "weight 2" in page
    runs_per_day = re.search(r'data-limit="runs_per_day".*?</tr>', page, re.S)[0]
    assert "unlimited" in runs_per_day and "this tenant's own" in runs_per_day
    assert "100 runs" in runs_per_day  # the plan's value beside it
    assert "plan team-x" in re.search(r'data-limit="running_runs".*?</tr>', page, re.S)[0]
    # each agent: its own runs at once, else the tenant's (the plan's)
    assert holder_cells(page, "data-agent", "alpha") == {"agent_running_runs": (1, True)}
    assert holder_cells(page, "data-agent", "plain") == {"agent_running_runs": (2, False)}
    # the key with rates of its own, each over the tenant's; the other keys counted
    assert holder_cells(page, "data-key", "batch") == {
        "key_requests_per_second": (9, True),
        "key_request_burst": (0, False),
    }
    assert 'data-key="ordinary"' not in page
    assert "1 other active key: each has the tenant's per-key limits" in page
    # an owner reads them; operators change them
    assert 'id="limits-change"' not in page and "/admin/" not in page


def test_the_default_plan_and_no_plan_are_said(client, world, settings):
    Plan.objects.create(name="house-x", running_runs=6)
    settings.A2A_DEFAULT_PLAN = "house-x"
    b = world["b"]
    b.limits = {"stored_tasks": 50}
    b.save()
    client.force_login(world["owner_b"])
    page = unescape(client.get(limits_url(b)).content.decode())
    rows = tenant_rows(page)
    assert rows["running_runs"] == (6, "default-plan")
    assert rows["stored_tasks"] == (50, "tenant")
    assert "the platform's default plan" in page
    # with no default plan either: nothing but the tenant's own
    settings.A2A_DEFAULT_PLAN = ""
    rows = tenant_rows(client.get(limits_url(b)).content.decode())
    assert rows["running_runs"] == (0, "none")
    assert rows["stored_tasks"] == (50, "tenant")


def test_members_of_the_tenant_see_it_others_get_404(client, limited):
    url = limits_url(limited["a"])
    for outsider in ("member_b", "owner_b"):
        client.force_login(limited[outsider])
        response = client.get(url)
        assert response.status_code == 404, outsider
        assert "team-x" not in response.content.decode()
    client.force_login(limited["member_a"])
    assert tenant_rows(client.get(url).content.decode())["running_runs"] == (3, "plan")
    client.logout()
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith(reverse("console:login"))


def test_operators_see_any_tenant_with_the_way_to_change_it(client, limited):
    client.force_login(limited["operator"])
    page = client.get(limits_url(limited["a"])).content.decode()
    assert tenant_rows(page)["queued_runs"] == (40, "tenant")
    assert f'href="/admin/agents/tenant/{limited["a"].pk}/change/"' in page
    assert f'href="/admin/agents/plan/{limited["plan"].pk}/change/"' in page
    assert f'href="/admin/agents/agent/{limited["agent_a"].pk}/change/"' in page
    response = client.get(limits_url(limited["b"]))
    assert response.status_code == 200
    assert tenant_rows(response.content.decode())["running_runs"] == (0, "none")


def test_the_tenants_pages_link_to_it(client, limited):
    client.force_login(limited["member_a"])
    url = limits_url(limited["a"])
    overview = client.get(reverse("console:overview")).content.decode()
    assert f'href="{url}"' in overview
    agent = limited["agent_a"]
    page = client.get(
        reverse("console:agent", kwargs={"tenant_slug": agent.tenant.slug, "agent_slug": "alpha"})
    ).content.decode()
    limits_card = re.search(r'<section class="card" id="agent-limits">.*?</section>', page, re.S)
    assert limits_card and f'href="{url}"' in limits_card[0]
    assert "<code>agent_running_runs</code> 1" in limits_card[0]
