"""The agent admin: a new agent starts with the console's default modes, and executor secrets
are write-only (set, kept, replaced, cleared; never in a page, not even one with errors)."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth import get_user_model

from agents.crypto import decrypt
from agents.models import DEFAULT_MODES, Agent
from console.forms import AgentRegistrationForm

SHOUTING = "tests.agents.sample_executors.ShoutingExecutor"
GREETING = "tests.agents.sample_executors.GreetingExecutor"
SECRET = "TopSecret-admin-4b1d"
ADD = "/admin/agents/agent/add/"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    return client


@pytest.fixture
def allowlist(settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING, GREETING]


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
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "is_active": "on",
        "push_notifications": "on",
        "protocol_versions": ["1.0", "0.3", "0.1"],
        "deduplicate_messages": "on",
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


def test_the_versions_served_are_checkboxes_and_de_duplication_a_tick(
    admin_client, make_tenant, allowlist
):
    tenant = make_tenant()
    # a new agent starts serving every version, de-duplicating
    page = admin_client.get(ADD).content.decode()
    for version in ("1.0", "0.3", "0.1"):
        assert re.search(
            rf'type="checkbox" name="protocol_versions" value="{version}"[^>]*checked', page
        )
    assert re.search(r'name="deduplicate_messages"[^>]*checked', page)
    # none ticked is refused, with what to do
    response = admin_client.post(ADD, agent_form(tenant, protocol_versions=[]))
    assert response.status_code == 200
    assert "Choose at least one A2A version" in response.content.decode()
    # saved as the model stores it, de-duplication off when unticked
    response = admin_client.post(
        ADD, agent_form(tenant, protocol_versions=["0.3", "1.0"], deduplicate_messages=None)
    )
    assert response.status_code == 302, response.content[:3000]
    agent = Agent.objects.get(tenant=tenant, slug="shouter")
    assert (agent.protocol_versions, agent.deduplicate_messages) == ("1.0,0.3", False)
    # the change page shows them
    change = admin_client.get(f"/admin/agents/agent/{agent.pk}/change/").content.decode()
    assert re.search(r'name="protocol_versions" value="0.3"[^>]*checked', change)
    assert not re.search(r'name="protocol_versions" value="0.1"[^>]*checked', change)


def test_secrets_set_in_the_admin_are_stored_encrypted_and_shown_by_name_only(
    admin_client, make_tenant, allowlist
):
    tenant = make_tenant()
    # the add page offers the write-only field next to the config, with nothing stored
    page = admin_client.get(ADD).content.decode()
    assert 'name="executor_secrets"' in page and "Not set" in page
    assert page.index('name="executor_config"') < page.index('name="executor_secrets"')
    # when an agent is added with a secret
    secrets = json.dumps({"token": SECRET, "api_key": SECRET + "-2"})
    config = json.dumps({"class_path": GREETING, "init_kwargs": {"greeting": "Hi"}})
    response = admin_client.post(
        ADD, agent_form(tenant, executor_config=config, executor_secrets=secrets)
    )
    assert response.status_code == 302, response.content[:3000]
    agent = Agent.objects.get(tenant=tenant, slug="shouter")
    # then it is stored encrypted, apart from the config
    assert SECRET not in agent.executor_secrets_encrypted
    assert json.loads(decrypt(agent.executor_secrets_encrypted))["token"] == SECRET
    assert SECRET not in json.dumps(agent.executor_config)
    # and no admin page shows it; the change page names the secrets
    for url, html in pages_of(admin_client, agent).items():
        assert SECRET not in html, url
    change = pages_of(admin_client, agent)[f"/admin/agents/agent/{agent.pk}/change/"]
    assert "Set: api_key, token" in change


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
    admin_client.post(url, agent_form(tenant, executor_secrets='{"suffix": "t-1"}'))
    agent.refresh_from_db()
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"suffix": "t-1"}
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


# --- each executor kind's fields ---------------------------------------------------------------


def admin_posted(form, **changes):
    """What the browser sends for the admin's form as it shows it, with `changes`."""
    from django import forms as django_forms

    data = {}
    for field in form:
        value = field.value()
        widget = field.field.widget
        if isinstance(widget, django_forms.CheckboxInput):
            if value:
                data[field.name] = "on"
        elif isinstance(widget, django_forms.PasswordInput) or value is None:
            data[field.name] = ""
        elif isinstance(value, list):  # a select of several: the first is enough here
            data[field.name] = str(value[0]) if value else ""
        else:
            data[field.name] = str(value)
        if field.field.show_hidden_initial:  # rendered beside the field: the browser sends it
            data[field.html_initial_name] = field.field.prepare_value(field.initial)
    data.update(changes)
    return data


def test_the_change_form_shows_each_kinds_group_and_saves_its_fields(
    admin_client, make_tenant, make_agent, settings
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    agent = make_agent(make_tenant(), "writer")
    url = f"/admin/agents/agent/{agent.pk}/change/"
    response = admin_client.get(url)
    page = response.content.decode()
    # one fieldset per kind, with its fields and their help; the JSON config stays for operators
    for kind in ("echo", "conformance", "python", "openai", "a2a_proxy", "webhook"):
        assert f"kind-group--{kind}" in page, kind
    assert 'name="cfg__openai__base_url"' in page and "requests go to &lt;base_url&gt;" in page
    assert 'type="password" name="secret__openai__api_key"' in page
    assert 'name="executor_config"' in page and "console/agent_form.js" in page
    assert page.count("data-test-connection") == 3  # openai, a2a-proxy, webhook
    # when the operator makes it an openai agent in the openai group
    form = admin_posted(
        response.context["adminform"].form,
        executor_kind="openai",
        cfg__openai__base_url="http://127.0.0.1:9/v1",
        cfg__openai__model="small-model",
        cfg__openai__max_tokens="64",
        secret__openai__api_key=SECRET,
    )
    response = admin_client.post(url, form)
    assert response.status_code == 302, response.context["adminform"].form.errors
    agent.refresh_from_db()
    assert agent.executor_kind == "openai"
    assert agent.executor_config["model"] == "small-model"
    assert (
        agent.executor_config["max_tokens"] == 64 and agent.executor_config["temperature"] is None
    )
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"api_key": SECRET}
    # then no admin page shows the key; the change page says it is set
    for page_url, html in pages_of(admin_client, agent).items():
        assert SECRET not in html, page_url
    change = admin_client.get(url)
    assert "Set — leave empty to keep it." in change.content.decode()
    assert 'name="secret_remove__openai__api_key"' in change.content.decode()
    # an error names its field, and the page with it does not echo a typed key
    form = admin_posted(
        change.context["adminform"].form,
        cfg__openai__temperature="3",
        secret__openai__api_key=SECRET + "-new",
    )
    response = admin_client.post(url, form)
    html = response.content.decode()
    assert response.status_code == 200 and "less than or equal to 2" in html
    assert SECRET not in html
    agent.refresh_from_db()
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"api_key": SECRET}


def test_the_admins_test_connection_answers_for_the_chosen_kind(
    admin_client, make_tenant, make_agent
):
    agent = make_agent(make_tenant(), "writer")
    url = f"/admin/agents/agent/{agent.pk}/test-connection/"
    assert admin_client.get(url).status_code == 405
    response = admin_client.post(url, {"executor_kind": "echo"})
    assert response.status_code == 400 and "nothing to test" in response.json()["message"]
    # 127.0.0.1 is refused in this process: reported on its field, not tried
    response = admin_client.post(
        "/admin/agents/agent/test-connection/",
        {"executor_kind": "webhook", "cfg__webhook__url": "http://127.0.0.1:9/hook"},
    )
    answer = response.json()
    assert response.status_code == 400 and answer["ok"] is False
    assert "url" in answer["errors"]["cfg__webhook__url"][0]
