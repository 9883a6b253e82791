"""The console's agent pages: scoping by tenant and role, registration with per-kind validation,
keys shown once and revoked, the card preview, and a client snippet that really works."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import uuid

import httpx
import pytest
from django.urls import reverse

from agents.models import Agent, ApiKey, Membership
from agents.services import api_key_create
from console.forms import AgentRegistrationForm


def agent_url(agent: Agent, name: str = "console:agent", **extra) -> str:
    return reverse(
        name, kwargs={"tenant_slug": agent.tenant.slug, "agent_slug": agent.slug, **extra}
    )


def test_pages_need_a_login(client, world):
    for url in (reverse("console:overview"), agent_url(world["agent_a"])):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("console:login"))


def test_overview_lists_only_the_members_tenants(client, world):
    client.force_login(world["member_a"])
    page = client.get(reverse("console:overview")).content.decode()
    assert world["a"].slug in page and "alpha" in page
    assert world["b"].slug not in page and "beta" not in page
    assert "Register an agent" not in page  # members do not register agents
    client.force_login(world["operator"])
    page = client.get(reverse("console:overview")).content.decode()
    assert "alpha" in page and "beta" in page and "Register an agent" in page


def test_another_tenants_agent_and_its_actions_are_404(client, world):
    client.force_login(world["member_b"])
    agent = world["agent_a"]
    key = api_key_create(tenant=world["a"], name="k")[0]
    assert client.get(agent_url(agent)).status_code == 404
    assert client.post(agent_url(agent, "console:key-create"), {"name": "x"}).status_code == 404
    revoke = agent_url(agent, "console:key-revoke", prefix=key.prefix)
    assert client.post(revoke).status_code == 404
    new = reverse("console:agent-new", kwargs={"tenant_slug": world["a"].slug})
    assert client.get(new).status_code == 404
    assert not ApiKey.objects.filter(name="x").exists()
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None


def test_members_look_but_do_not_manage(client, world):
    client.force_login(world["member_a"])
    agent = world["agent_a"]
    page = client.get(agent_url(agent)).content.decode()
    assert 'id="key-form"' not in page and "you are a member" in page
    response = client.post(agent_url(agent, "console:key-create"), {"name": "x"})
    assert response.status_code == 403
    assert "Only owners" in response.content.decode()
    new = reverse("console:agent-new", kwargs={"tenant_slug": world["a"].slug})
    assert client.get(new).status_code == 403


def test_agent_page_shows_urls_grpc_tenant_and_card(client, world, settings):
    settings.A2A_GRPC_PUBLIC_ADDRESS = "grpc.example.com:443"
    client.force_login(world["owner_a"])
    agent = world["agent_a"]
    page = client.get(agent_url(agent)).content.decode()
    base = f"{settings.A2A_PUBLIC_BASE_URL}/a2a/{agent.tenant.slug}/alpha/"
    for url in (base + ".well-known/agent-card.json", base, base.rstrip("/"), base + "v1"):
        assert f"<code>{url}</code>" in page
    assert "grpc.example.com:443" in page and f"{agent.tenant.slug}/alpha" in page
    card = json.loads(html.unescape(re.search(r'id="card-json">(.*?)</pre>', page, re.S)[1]))
    assert card["name"] == "Alpha" and card["supportedInterfaces"]


def test_register_an_agent_with_field_errors_then_valid(client, world):
    client.force_login(world["owner_a"])
    url = reverse("console:agent-new", kwargs={"tenant_slug": world["a"].slug})
    form = {
        "slug": "gamma",
        "name": "Gamma",
        "description": "A slow echo.",
        "version": "1.0.0",
        "executor_kind": "echo",
        "executor_config": '{"delay_seconds": "soon"}',
        "skills": "[]",
        "default_input_modes": '["text/plain"]',
        "default_output_modes": '["text/plain"]',
        "visibility": "private",
        "anonymous_scope": "isolated",
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "push_notifications": "on",
        "protocol_versions": ["1.0"],  # deduplicate_messages unticked: not sent
    }
    page = client.get(url).content.decode()
    assert 'id="executor-kinds"' in page and "delay_seconds" in page and "class_path" in page
    # every version ticked, and de-duplication, to start with
    for version in ("1.0", "0.3", "0.1"):
        assert re.search(rf'name="protocol_versions" value="{version}"[^>]*checked', page)
    assert re.search(r'name="deduplicate_messages"[^>]*checked', page)
    assert "{&quot;class&quot;:" not in page  # the config help names the keys as they are
    page = client.post(url, form).content.decode()
    error = re.search(r'id="error-executor_config">(.*?)</p>', page, re.S)
    assert error and "delay_seconds" in error[1]
    page = client.post(url, {**form, "executor_config": "{}", "skills": '[{"id": 1}]'}).content
    assert b'id="error-skills"' in page
    page = client.post(url, {**form, "executor_config": "{}", "slug": "alpha"}).content.decode()
    assert 'id="error-slug"' in page and "has an agent" in page
    page = client.post(url, {**form, "executor_config": "{}", "protocol_versions": []}).content
    assert b'id="error-protocol_versions"' in page and b"at least one A2A version" in page
    assert not Agent.objects.filter(slug="gamma").exists()
    response = client.post(url, {**form, "executor_config": '{"delay_seconds": 0.5}'})
    agent = Agent.objects.get(tenant=world["a"], slug="gamma")
    assert response.status_code == 302 and response["Location"] == agent_url(agent)
    assert agent.executor_config["delay_seconds"] == 0.5 and agent.push_notifications
    assert agent.protocol_versions == "1.0" and not agent.deduplicate_messages
    # the edit page shows what it serves
    edit = client.get(agent_url(agent, "console:agent-edit")).content.decode()
    assert re.search(r'name="protocol_versions" value="1.0"[^>]*checked', edit)
    assert not re.search(r'name="protocol_versions" value="0.3"[^>]*checked', edit)


@pytest.mark.parametrize(
    ("posted", "stored", "problem"),
    [
        (["0.1", "1.0"], "1.0,0.1", ""),  # stored newest first
        ("0.3, 1.0", "1.0,0.3", ""),  # a script may post the stored form
        ([], None, "Choose at least one A2A version for the agent to serve."),
        (["1.0", "2.0"], None, "2.0 is not an A2A version the platform speaks (it speaks 1.0, "),
        ("1.0,v1", None, "v1 is not an A2A version the platform speaks"),
    ],
)
def test_the_versions_field_takes_one_or_more_versions_the_platform_speaks(
    world, posted, stored, problem
):
    data = {
        "slug": "versioned",
        "name": "Versioned",
        "description": "d",
        "version": "1.0.0",
        "executor_kind": "echo",
        "visibility": "private",
        "anonymous_scope": "isolated",
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "protocol_versions": posted,
    }
    form = AgentRegistrationForm(data, tenant=world["a"])
    if stored is not None:
        assert form.is_valid(), form.errors
        assert form.agent_fields()["protocol_versions"] == stored
    else:
        assert not form.is_valid()
        assert form.errors["protocol_versions"][0].startswith(problem), form.errors


def test_the_agent_page_shows_the_versions_it_serves(client, world, make_agent):
    agent = make_agent(world["a"], "modern", protocol_versions="1.0", deduplicate_messages=False)
    client.force_login(world["owner_a"])
    page = client.get(agent_url(agent)).content.decode()
    assert "Serves A2A <strong>1.0</strong>:" in page and "not de-duplicated" in page
    assert "JSON-RPC 2.0 (v1.0)" in page and "HTTP+JSON v1.0" in page and "gRPC (v1.0)" in page
    assert "HTTP+JSON v0.3" not in page and "a2a-agent:" not in page
    card = json.loads(html.unescape(re.search(r'id="card-json">(.*?)</pre>', page, re.S)[1]))
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0"}
    assert "url" not in card  # the strict v1.0 card


def test_a_key_secret_is_shown_once_then_revoked(client, world):
    client.force_login(world["owner_a"])
    agent = world["agent_a"]
    response = client.post(
        agent_url(agent, "console:key-create"), {"name": "ci-bot", "this_agent_only": "on"}
    )
    assert response.status_code == 302
    page = client.get(agent_url(agent)).content.decode()
    secret = re.search(r'id="new-secret">([^<]+)<', page)[1]
    key = ApiKey.objects.get(name="ci-bot")
    assert key.agent == agent and key.principal == "ci-bot" and key.scopes == []
    assert secret.startswith("a2a_") and key.secret_hash not in page
    assert secret not in client.get(agent_url(agent)).content.decode()  # once only
    client.post(agent_url(agent, "console:key-revoke", prefix=key.prefix))
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert f'data-prefix="{key.prefix}"' not in client.get(agent_url(agent)).content.decode()


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_the_snippet_on_the_agent_page_calls_the_agent(
    live_platform, make_tenant, make_agent, django_user_model
):
    """Log in to the live server, create a key on the agent page, paste both into the snippet
    and run it: it reaches the agent through the a2a-sdk client."""
    tenant = make_tenant()
    agent = make_agent(tenant, "snippet")
    user = django_user_model.objects.create_user(f"u{uuid.uuid4().hex[:8]}", password="pw")
    Membership.objects.create(user=user, tenant=tenant, role="owner")
    with httpx.Client(base_url=live_platform.url, timeout=30) as http:
        http.get("/console/login/")
        login = http.post(
            "/console/login/",
            data={"username": user.username, "password": "pw"},
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
        assert login.status_code == 302
        page_url = agent_url(agent)
        http.post(
            page_url + "keys/new/",
            data={"name": "snippet-key", "this_agent_only": "on"},
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
        page = http.get(page_url).text
    secret = re.search(r'id="new-secret">([^<]+)<', page)[1]
    snippet = html.unescape(re.search(r'id="client-snippet">(.*?)</pre>', page, re.S)[1])
    assert f'URL = "{live_platform.url}/a2a/{tenant.slug}/snippet/"' in snippet
    code = snippet.replace('"a2a_..."', json.dumps(secret)).replace('"hello"', '"from the page"')
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "TASK_STATE_COMPLETED" in run.stdout and "from the page" in run.stdout


def test_a_new_secret_shows_only_on_its_agents_page_once(client, world, make_agent):
    client.force_login(world["owner_a"])
    agent, other = world["agent_a"], make_agent(world["a"], "other")
    client.post(agent_url(agent, "console:key-create"), {"name": "k", "this_agent_only": "on"})
    # Another agent's page, opened first (another tab), neither shows nor consumes it.
    assert 'id="new-secret"' not in client.get(agent_url(other)).content.decode()
    response = client.get(agent_url(agent))
    assert 'id="new-secret"' in response.content.decode()
    assert "no-store" in response["Cache-Control"]  # the browser does not keep the page
    assert 'id="new-secret"' not in client.get(agent_url(agent)).content.decode()


def test_a_deactivated_tenant_is_closed_to_its_people_not_to_operators(client, world):
    world["a"].is_active = False
    world["a"].save()
    client.force_login(world["owner_a"])
    assert client.get(agent_url(world["agent_a"])).status_code == 404
    assert world["a"].slug not in client.get(reverse("console:overview")).content.decode()
    client.force_login(world["operator"])
    assert client.get(agent_url(world["agent_a"])).status_code == 200


def test_a_key_prefix_that_is_not_a_prefix_is_404(client, world):
    client.force_login(world["owner_a"])
    base = agent_url(world["agent_a"])
    assert client.post(base + "keys/a%00b/revoke/").status_code == 404
