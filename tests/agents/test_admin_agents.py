"""The agent admin: a new agent starts with the console's default modes, and executor secrets
are write-only (set, kept, replaced, cleared; never in a page, not even one with errors)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model

from agents.crypto import decrypt
from agents.models import DEFAULT_MODES, Agent
from console.forms import AgentRegistrationForm

SHOUTING = "tests.agents.sample_executors.ShoutingExecutor"
SECRET = "TopSecret-admin-4b1d"
ADD = "/admin/agents/agent/add/"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    return client


@pytest.fixture
def allowlist(settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING]


def agent_form(tenant, **changes):
    form = {
        "tenant": tenant.pk,
        "slug": "shouter",
        "name": "Shouter",
        "description": "d",
        "version": "1.0.0",
        "executor_kind": "python",
        "executor_config": json.dumps({"class_path": SHOUTING}),
        "executor_secrets": "",
        "skills": "[]",
        "extended_skills": "[]",
        "default_input_modes": '["text/plain"]',
        "default_output_modes": '["text/plain"]',
        "visibility": "private",
        "anonymous_scope": "isolated",
        "is_active": "on",
        "push_notifications": "on",
    }
    form.update(changes)
    return {name: value for name, value in form.items() if value is not None}


def pages_of(client, agent):
    """Every admin page that shows the agent."""
    base = f"/admin/agents/agent/{agent.pk}/"
    urls = ["/admin/agents/agent/", f"{base}change/", f"{base}history/", f"{base}delete/"]
    return {url: client.get(url).content.decode() for url in urls}


def test_a_new_agent_starts_with_the_same_modes_as_in_the_console(admin_client, make_tenant):
    tenant = make_tenant()
    console = AgentRegistrationForm(tenant=tenant)
    response = admin_client.get(ADD)
    assert response.status_code == 200
    admin_form = response.context["adminform"].form
    for field in ("default_input_modes", "default_output_modes"):
        assert admin_form.initial[field] == console.initial[field] == list(DEFAULT_MODES)
        assert json.loads(admin_form[field].value()) == list(DEFAULT_MODES)
    assert "text/plain" in response.content.decode()


def test_an_agent_that_exists_keeps_its_modes(admin_client, make_tenant, make_agent):
    agent = make_agent(make_tenant(), default_input_modes=["application/json"])
    form = admin_client.get(f"/admin/agents/agent/{agent.pk}/change/").context["adminform"].form
    assert json.loads(form["default_input_modes"].value()) == ["application/json"]
    assert json.loads(form["default_output_modes"].value()) == []


def test_secrets_set_in_the_admin_are_stored_encrypted_and_shown_by_name_only(
    admin_client, make_tenant, allowlist
):
    tenant = make_tenant()
    # the add page offers the write-only field next to the config, with nothing stored
    page = admin_client.get(ADD).content.decode()
    assert 'name="executor_secrets"' in page and "Not set" in page
    assert page.index('name="executor_config"') < page.index('name="executor_secrets"')
    # when an agent is added with a secret
    secrets = json.dumps({"suffix": SECRET, "api_key": SECRET + "-2"})
    response = admin_client.post(ADD, agent_form(tenant, executor_secrets=secrets))
    assert response.status_code == 302, response.content[:3000]
    agent = Agent.objects.get(tenant=tenant, slug="shouter")
    # then it is stored encrypted, apart from the config
    assert SECRET not in agent.executor_secrets_encrypted
    assert json.loads(decrypt(agent.executor_secrets_encrypted))["suffix"] == SECRET
    assert SECRET not in json.dumps(agent.executor_config)
    # and no admin page shows it; the change page names the secrets
    for url, html in pages_of(admin_client, agent).items():
        assert SECRET not in html, url
    change = pages_of(admin_client, agent)[f"/admin/agents/agent/{agent.pk}/change/"]
    assert "Set: api_key, suffix" in change


def test_an_empty_secrets_field_keeps_them_a_new_object_replaces_a_tick_clears(
    admin_client, make_tenant, make_agent, allowlist
):
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "shouter",
        kind="python",
        config={"class_path": SHOUTING},
        executor_secrets={"suffix": SECRET},
    )
    url = f"/admin/agents/agent/{agent.pk}/change/"
    # left empty: the secrets stay (and the other fields change)
    response = admin_client.post(url, agent_form(tenant, name="Renamed"))
    assert response.status_code == 302, response.content[:3000]
    agent.refresh_from_db()
    assert agent.name == "Renamed"
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"suffix": SECRET}
    # a new object replaces them all
    admin_client.post(url, agent_form(tenant, executor_secrets='{"token": "t-1"}'))
    agent.refresh_from_db()
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"token": "t-1"}
    # the tick clears them
    admin_client.post(url, agent_form(tenant, executor_secrets_clear="on"))
    agent.refresh_from_db()
    assert agent.executor_secrets_encrypted == ""
    assert "Not set" in admin_client.get(url).content.decode()


def test_refused_changes_never_echo_a_secret(admin_client, make_tenant, make_agent, allowlist):
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "shouter",
        kind="python",
        config={"class_path": SHOUTING},
        executor_secrets={"suffix": SECRET},
    )
    url = f"/admin/agents/agent/{agent.pk}/change/"
    clash = json.dumps({"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}})
    new = json.dumps({"suffix": SECRET + "-new"})
    cases = [
        # init_kwargs now names a stored secret
        (agent_form(tenant, executor_config=clash), "suffix: given both"),
        # a new secret clashes with init_kwargs: the page with the error does not echo it
        (agent_form(tenant, executor_config=clash, executor_secrets=new), "suffix: given both"),
        # not JSON
        (agent_form(tenant, executor_secrets='{"suffix": "' + SECRET), "Not valid JSON"),
        # new ones and a tick to clear
        (
            agent_form(tenant, executor_secrets=new, executor_secrets_clear="on"),
            "Give new secrets or clear them, not both.",
        ),
        # a kind that takes no secrets while some are stored
        (agent_form(tenant, executor_kind="echo", executor_config="{}"), "takes no secrets"),
    ]
    for form, problem in cases:
        response = admin_client.post(url, form)
        html = response.content.decode()
        assert response.status_code == 200 and problem in html, problem
        assert SECRET not in html, problem
    agent.refresh_from_db()
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"suffix": SECRET}
    assert agent.executor_config == {"class_path": SHOUTING, "init_kwargs": {}}
    # choosing echo and clearing at once is fine
    response = admin_client.post(
        url,
        agent_form(tenant, executor_kind="echo", executor_config="{}", executor_secrets_clear="on"),
    )
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.executor_kind == "echo" and agent.executor_secrets_encrypted == ""


def test_the_history_names_the_change_not_the_secret(
    admin_client, make_tenant, make_agent, allowlist
):
    tenant = make_tenant()
    agent = make_agent(tenant, "shouter", kind="python", config={"class_path": SHOUTING})
    url = f"/admin/agents/agent/{agent.pk}/change/"
    admin_client.post(url, agent_form(tenant, executor_secrets=json.dumps({"suffix": SECRET})))
    history = admin_client.get(f"/admin/agents/agent/{agent.pk}/history/").content.decode()
    assert "Executor secrets" in history and SECRET not in history
