"""Plans and limit overrides in the admin: a plan is made with its limits; a tenant's, an
agent's and a key's overrides are one number field per limit that may be set there, stored as
the JSON object the form said (empty fields are no override), and a bad value or a limit of
another scope is refused with an error that says which, nothing stored. The default plan
(A2A_DEFAULT_PLAN) cannot be deleted or renamed from under the tenants that have it. The demo's
seeding makes two plans to start from and leaves the demo tenant unlimited."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from agents import plans
from agents.admin import LIMIT_PREFIX
from agents.cache import tenant_limits
from agents.models import Agent, ApiKey, Plan, Tenant
from agents.services import api_key_create

from .test_admin_agents import agent_form

PLAN_ADD = "/admin/agents/plan/add/"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    return client


def plan_form(name: str, **limits: int) -> dict[str, Any]:
    form: dict[str, Any] = {"name": name, "description": "", "weight": "1"}
    form.update({limit: "0" for limit in plans.NAMES})
    form.update({limit: str(value) for limit, value in limits.items()})
    return form


def tenant_form(tenant: Tenant, plan: Plan | None = None, **limits: str) -> dict[str, Any]:
    form: dict[str, Any] = {
        "slug": tenant.slug,
        "name": tenant.name,
        "is_active": "on",
        "plan": plan.pk if plan else "",
        # the signing keys' inline, as the change page posts it (no rows)
        "signing_keys-TOTAL_FORMS": "0",
        "signing_keys-INITIAL_FORMS": "0",
    }
    form.update({LIMIT_PREFIX + name: value for name, value in limits.items()})
    return form


def tenant_change(tenant: Tenant) -> str:
    return f"/admin/agents/tenant/{tenant.pk}/change/"


def field_errors(response: Any, field: str) -> list[str]:
    """The messages the admin's page shows on `field` (each is on the page as well)."""
    errors = list(response.context["adminform"].form.errors.get(field, []))
    page = unescape(response.content.decode())
    assert all(error in page for error in errors), errors
    return errors


def form_errors(response: Any) -> list[str]:
    """The errors the admin's page shows above the form: the form's own, not a field's."""
    errors = list(response.context["adminform"].form.non_field_errors())
    page = unescape(response.content.decode())
    assert all(error in page for error in errors), errors
    return errors


def test_an_operator_makes_a_plan_with_its_limits(admin_client):
    response = admin_client.post(
        PLAN_ADD, plan_form("pro-x", requests_per_second=40, running_runs=8) | {"weight": "3"}
    )
    assert response.status_code == 302, response.content[:3000]
    plan = Plan.objects.get(name="pro-x")
    assert (plan.weight, plan.requests_per_second, plan.running_runs) == (3, 40, 8)
    assert plan.runs_per_day == 0  # unlimited
    listing = admin_client.get("/admin/agents/plan/").content.decode()
    assert "pro-x" in listing


def test_a_plan_limit_out_of_range_is_refused_on_its_field(admin_client):
    response = admin_client.post(PLAN_ADD, plan_form("bad-x", running_runs=-1))
    assert response.status_code == 200
    assert field_errors(response, "running_runs")
    assert not Plan.objects.filter(name="bad-x").exists()


def test_a_tenants_overrides_are_number_fields_stored_as_the_form_said(admin_client, make_tenant):
    tenant = make_tenant()
    plan = Plan.objects.create(name="small-x", running_runs=2, runs_per_day=100)
    page = admin_client.get(tenant_change(tenant)).content.decode()
    # one number input per limit a tenant may override; no JSON textarea for them
    for name in plans.NAMES:
        assert re.search(rf'<input type="number" name="{LIMIT_PREFIX}{name}"', page), name
    assert 'name="limits"' not in page
    # when the operator gives it the plan, raises one limit and lifts another
    response = admin_client.post(
        tenant_change(tenant),
        tenant_form(tenant, plan, running_runs="20", runs_per_day="0", queued_runs=""),
    )
    # then
    assert response.status_code == 302, response.content[:3000]
    tenant.refresh_from_db()
    assert tenant.plan == plan
    assert tenant.limits == {"running_runs": 20, "runs_per_day": 0}
    # and the page shows them again, the empty fields empty
    form = admin_client.get(tenant_change(tenant)).context["adminform"].form
    assert form[f"{LIMIT_PREFIX}running_runs"].value() == 20
    assert form[f"{LIMIT_PREFIX}runs_per_day"].value() == 0
    assert form[f"{LIMIT_PREFIX}queued_runs"].value() is None
    # emptied again, the override goes
    response = admin_client.post(tenant_change(tenant), tenant_form(tenant, plan, running_runs="5"))
    assert response.status_code == 302
    tenant.refresh_from_db()
    assert tenant.limits == {"running_runs": 5}


@pytest.mark.parametrize(
    "value, message",
    [
        ("-1", "A limit is 0 (unlimited) or more."),
        (str(plans.MAX_VALUE + 1), f"A limit is at most {plans.MAX_VALUE}; 0 is unlimited."),
        ("lots", "Give a whole number of runs (0 is unlimited), or leave it empty for the "),
        ("2.5", "Give a whole number of runs (0 is unlimited), or leave it empty for the "),
    ],
)
def test_a_bad_override_is_refused_on_its_field_and_nothing_is_stored(
    admin_client, make_tenant, value, message
):
    tenant = make_tenant()
    response = admin_client.post(
        tenant_change(tenant), tenant_form(tenant, running_runs=value, queued_runs="7")
    )
    assert response.status_code == 200
    errors = field_errors(response, f"{LIMIT_PREFIX}running_runs")
    assert len(errors) == 1 and errors[0].startswith(message), errors
    assert field_errors(response, f"{LIMIT_PREFIX}queued_runs") == []
    tenant.refresh_from_db()
    assert tenant.limits == {}


def test_a_limit_not_allowed_at_a_scope_is_refused_naming_the_allowed_ones(
    admin_client, make_tenant, make_agent
):
    tenant = make_tenant()
    agent = make_agent(tenant, "capped")
    change = f"/admin/agents/agent/{agent.pk}/change/"
    # the agent's page has a field for its one limit only
    page = admin_client.get(change).content.decode()
    assert f'name="{LIMIT_PREFIX}agent_running_runs"' in page
    assert f'name="{LIMIT_PREFIX}running_runs"' not in page
    # when a tenant's limit is posted for the agent (as a script would)
    form = agent_form(
        tenant,
        slug="capped",
        executor_kind="echo",
        executor_config="{}",
        **{f"{LIMIT_PREFIX}agent_running_runs": "3", f"{LIMIT_PREFIX}running_runs": "9"},
    )
    response = admin_client.post(change, form)
    # then the form says what may be set on an agent, and nothing is stored
    assert response.status_code == 200
    assert form_errors(response) == [
        "'running_runs' is not a limit that can be set on an agent; those are: agent_running_runs."
    ]
    assert Agent.objects.get(pk=agent.pk).limits == {}
    # without it, the agent's own limit is stored
    del form[f"{LIMIT_PREFIX}running_runs"]
    response = admin_client.post(change, form)
    assert response.status_code == 302, response.content[:3000]
    assert Agent.objects.get(pk=agent.pk).limits == {"agent_running_runs": 3}


def test_a_keys_own_rates_are_set_on_its_page(admin_client, make_tenant):
    tenant = make_tenant()
    key = api_key_create(tenant=tenant, name="batch")[0]
    change = f"/admin/agents/apikey/{key.pk}/change/"
    form = {
        "tenant": tenant.pk,
        "name": "batch",
        "principal": key.principal,
        "scopes": "[]",
        "agent": "",
        f"{LIMIT_PREFIX}key_requests_per_second": "2",
        f"{LIMIT_PREFIX}key_request_burst": "",
    }
    response = admin_client.post(change, {**form, f"{LIMIT_PREFIX}stored_tasks": "1"})
    assert response.status_code == 200
    (error,) = form_errors(response)
    assert error.startswith("'stored_tasks' is not a limit that can be set on a key; those are: ")
    assert error.endswith("key_requests_per_second, key_request_burst.")
    response = admin_client.post(change, form)
    assert response.status_code == 302, response.content[:3000]
    assert ApiKey.objects.get(pk=key.pk).limits == {"key_requests_per_second": 2}


def test_the_default_plan_is_neither_deleted_nor_renamed(admin_client, settings):
    settings.A2A_DEFAULT_PLAN = "everyone-x"
    plan = Plan.objects.create(name="everyone-x", running_runs=4)
    other = Plan.objects.create(name="spare-x")
    change = f"/admin/agents/plan/{plan.pk}/change/"
    assert admin_client.get(f"/admin/agents/plan/{plan.pk}/delete/").status_code == 403
    assert admin_client.get(f"/admin/agents/plan/{other.pk}/delete/").status_code == 200
    response = admin_client.post(change, plan_form("renamed-x", running_runs=4))
    assert response.status_code == 200
    (error,) = field_errors(response, "name")
    assert "A2A_DEFAULT_PLAN='everyone-x'" in error and "Change the setting first" in error
    # its limits still change
    response = admin_client.post(change, plan_form("everyone-x", running_runs=6))
    assert response.status_code == 302
    assert Plan.objects.get(pk=plan.pk).running_runs == 6
    assert "delete_selected" not in admin_client.get("/admin/agents/plan/").content.decode()


def test_a_plan_that_tenants_have_is_not_deleted(admin_client, make_tenant):
    plan = Plan.objects.create(name="held-x")
    tenant = make_tenant()
    tenant.plan = plan
    tenant.save()
    delete = f"/admin/agents/plan/{plan.pk}/delete/"
    page = admin_client.get(delete).content.decode()
    assert "protected" in page and tenant.slug in page
    admin_client.post(delete, {"post": "yes"})
    assert Plan.objects.filter(pk=plan.pk).exists()


def test_seed_demo_makes_the_starting_plans_and_leaves_the_demo_unlimited(
    db, capsys, settings, monkeypatch
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # as `make run` sets it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    call_command("seed_demo")
    free, standard = Plan.objects.get(name="free"), Plan.objects.get(name="standard")
    for plan in (free, standard):
        plan.full_clean()  # values the admin would take
        assert plan.requests_per_second <= plan.request_burst
        assert plan.running_runs <= plan.queued_runs
    assert free.running_runs < standard.running_runs and free.weight < standard.weight
    # an operator's change survives the next start
    free.running_runs = 1
    free.save()
    call_command("seed_demo")
    assert Plan.objects.get(name="free").running_runs == 1
    assert Plan.objects.count() == 2
    # the demo tenant has no plan: make run and the TCK are not limited
    demo = Tenant.objects.get(slug="demo")
    assert demo.plan is None and demo.limits == {}
    assert tenant_limits(demo) == plans.UNLIMITED
    lines = capsys.readouterr().out.splitlines()
    said = "plans: free, standard (admin > Plans); demo has no plan: nothing limits it"
    assert lines.count(said) == 2
    # with a default plan named, the line says the demo has it
    settings.A2A_DEFAULT_PLAN = "free"
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert "demo has the default plan free (A2A_DEFAULT_PLAN)" in out


def test_the_plans_guide_names_every_limit_and_where_it_may_be_set():
    guide = (Path(__file__).resolve().parents[2] / "docs" / "plans.md").read_text()
    table = guide.split("## The limits, and where each may be set", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \|[^|]*\|([^|]*)\|([^|]*)\|([^|]*)\|$", table, re.M)
    assert [name for name, *_ in rows] == list(plans.NAMES)
    for name, *cells in rows:
        places = (plans.TENANT, plans.AGENT, plans.KEY)
        said = {place for place, cell in zip(places, cells, strict=True) if cell.strip() == "yes"}
        assert said == set(plans.BY_NAME[name].scopes), name
