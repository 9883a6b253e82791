"""The agent forms' executor kinds: one group of fields per kind (from its config model, with
its help texts), errors on the field they name, secrets write-only and merged with those
stored, and "test connection" (scoped to the tenant's owners, checked as a save would be, and
reaching a real local server)."""

from __future__ import annotations

import html
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django import forms
from django.test import Client
from django.urls import reverse

from agents.crypto import decrypt
from agents.executors import REGISTRY
from agents.executors.openai_chat import OpenAIConfig
from agents.models import Agent

from .test_agent_pages import agent_url

pytestmark = pytest.mark.django_db

SECRET = "sk-console-9f2e71"
OTHER_SECRET = "sk-console-replaced-4410"
LOCAL = ["127.0.0.0/8"]


def new_url(world: dict[str, Any]) -> str:
    return reverse("console:agent-new", kwargs={"tenant_slug": world["a"].slug})


def connection_url(agent: Agent | None = None, tenant: Any = None) -> str:
    if agent is not None:
        return agent_url(agent, "console:agent-test-connection")
    return reverse("console:agent-test-connection", kwargs={"tenant_slug": tenant.slug})


def posted(form: forms.BaseForm, **changes: Any) -> dict[str, Any]:
    """What a browser sends for the form as the page shows it (every group, secrets empty),
    with `changes` (None drops a field)."""
    data: dict[str, Any] = {}
    for field in form:
        if field.field.disabled or field.name == "executor_config":
            continue  # disabled inputs are not sent; the console shows no JSON config
        widget = field.field.widget
        value = field.value()
        if isinstance(widget, forms.CheckboxInput):
            if value:
                data[field.name] = "on"
        elif isinstance(widget, forms.CheckboxSelectMultiple):
            data[field.name] = list(value or [])  # one value per ticked box
        elif isinstance(widget, forms.PasswordInput) or value is None:
            data[field.name] = ""
        else:
            data[field.name] = str(value)
    data.update({k: v for k, v in changes.items() if v is not None})
    return {k: v for k, v in data.items() if changes.get(k, "") is not None}


def group(page: str, kind: str) -> str:
    found = re.search(rf'<fieldset [^>]*id="kind-{kind}"[^>]*>(.*?)</fieldset>', page, re.S)
    assert found, kind
    return found[1]


def error(page: str, field: str) -> str:
    found = re.search(rf'id="error-{field}">(.*?)</p>', page, re.S)
    return html.unescape(found[1]) if found else ""


def openai_form(client: Client, url: str, **changes: Any) -> dict[str, Any]:
    form = client.get(url).context["form"]
    values = {
        "executor_kind": "openai",
        "cfg__openai__base_url": "http://127.0.0.1:9/v1",
        "cfg__openai__model": "small-model",
        "cfg__openai__temperature": "0.3",
        "cfg__openai__system_prompt": "Be brief.",
    }
    if "slug" in form.fields:
        values.update(slug="writer", name="Writer", description="Writes.")
    return posted(form, **{**values, **changes})


# --- the page --------------------------------------------------------------------------------


def test_the_new_agent_page_shows_each_kinds_group_with_its_help(client, world):
    client.force_login(world["owner_a"])
    page = client.get(new_url(world)).content.decode()
    assert 'name="executor_config"' not in page  # no JSON config in the console
    assert "{#" not in page and "{%" not in page
    for kind in REGISTRY.values():
        fields = group(page, kind.name.replace("-", "_"))
        assert f"<code>{kind.name}</code>" in fields
        for key, info in kind.config_model.model_fields.items():
            assert f'name="cfg__{kind.name.replace("-", "_")}__{key}"' in fields, key
            assert html.escape(info.description or "") in fields, key
    openai = group(page, "openai")
    assert re.search(r'type="url" name="cfg__openai__base_url"', openai)
    temperature = re.search(r'<input[^>]*name="cfg__openai__temperature"[^>]*>', openai)[0]
    assert 'type="number"' in temperature and 'min="0"' in temperature
    assert 'max="2"' in temperature
    assert (
        'value="20"' in re.search(r'<input[^>]*name="cfg__openai__history_turns"[^>]*>', openai)[0]
    )
    assert re.search(r'<input type="password" name="secret__openai__api_key"', openai)
    assert "Not set." in openai and "data-test-connection" in openai
    proxy = group(page, "a2a_proxy")
    assert '<select name="cfg__a2a_proxy__binding"' in proxy and '"HTTP+JSON"' in proxy
    assert 'type="checkbox" name="cfg__a2a_proxy__streaming"' in proxy
    assert 'name="secret__a2a_proxy__token"' in proxy
    echo = group(page, "echo")
    assert 'type="checkbox" name="cfg__echo__input_required"' in echo
    assert "data-test-connection" not in echo  # nothing to test
    python = group(page, "python")
    assert '<textarea name="cfg__python__init_kwargs"' in python
    assert "Not offered here" in python and 'name="executor_secrets"' in python
    assert "agent_form.js" in page


# --- registering and editing -----------------------------------------------------------------


def test_an_openai_agent_registered_in_the_console_keeps_its_key_write_only(
    client, world, settings
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    # when an openai agent is registered with its key
    data = openai_form(client, new_url(world), secret__openai__api_key=SECRET)
    response = client.post(new_url(world), data)
    agent = Agent.objects.get(tenant=world["a"], slug="writer")
    assert response.status_code == 302 and response["Location"] == agent_url(agent)
    # then the config is the openai group's, normalised by its model
    assert agent.executor_kind == "openai"
    assert agent.executor_config == OpenAIConfig(
        base_url="http://127.0.0.1:9/v1",
        model="small-model",
        temperature=0.3,
        system_prompt="Be brief.",
    ).model_dump(mode="json")
    # and the key is stored encrypted, apart from the config
    assert SECRET not in agent.executor_secrets_encrypted
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"api_key": SECRET}
    edit = agent_url(agent, "console:agent-edit")
    page = client.get(edit).content.decode()
    assert SECRET not in page and "Set — leave empty to keep it." in group(page, "openai")
    assert 'value="small-model"' in group(page, "openai")
    # a refused change comes back without the key typed, nor the stored one
    response = client.post(
        edit,
        openai_form(
            client, edit, cfg__openai__temperature="5", secret__openai__api_key=OTHER_SECRET
        ),
    )
    page = response.content.decode()
    assert response.status_code == 200 and "less than or equal to 2" in error(
        page, "cfg__openai__temperature"
    )
    assert OTHER_SECRET not in page and SECRET not in page
    # left empty, the key is kept while the rest changes
    client.post(edit, openai_form(client, edit, cfg__openai__model="bigger-model"))
    agent.refresh_from_db()
    assert agent.executor_config["model"] == "bigger-model"
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"api_key": SECRET}
    # typed, it replaces the one stored; the remove tick drops it
    client.post(edit, openai_form(client, edit, secret__openai__api_key=OTHER_SECRET))
    agent.refresh_from_db()
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"api_key": OTHER_SECRET}
    response = client.post(edit, openai_form(client, edit, secret_remove__openai__api_key="on"))
    assert response.status_code == 302
    agent.refresh_from_db()
    assert agent.executor_secrets_encrypted == ""
    assert "Not set." in group(client.get(edit).content.decode(), "openai")


def test_invalid_values_are_refused_on_the_field_they_name(client, world, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    url = new_url(world)
    data = openai_form(
        client,
        url,
        cfg__openai__temperature="5",
        cfg__openai__model="",
        cfg__openai__max_tokens="many",
        secret__openai__api_key=SECRET,
    )
    page = client.post(url, data).content.decode()
    assert error(page, "cfg__openai__temperature") == "Temperature must be less than or equal to 2."
    assert error(page, "cfg__openai__model") == "Model is required."
    assert error(page, "cfg__openai__max_tokens") == "Max tokens must be a whole number."
    assert 'id="error-executor_config"' not in page  # each error is on its field
    assert SECRET not in page
    # a group's JSON input that is not JSON, and a kind whose group was left as it is
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.ShoutingExecutor"]
    data = posted(
        client.get(url).context["form"],
        slug="shouter",
        name="Shouter",
        description="d",
        executor_kind="python",
        cfg__python__class_path="tests.agents.sample_executors.ShoutingExecutor",
        cfg__python__init_kwargs="{'suffix': 1}",
    )
    page = client.post(url, data).content.decode()
    assert error(page, "cfg__python__init_kwargs").startswith("Not valid JSON")
    assert not Agent.objects.filter(slug__in=["writer", "shouter"]).exists()


def test_a_private_base_url_is_refused_naming_base_url(client, world):
    client.force_login(world["owner_a"])  # 127.0.0.0/8 is not allowed in this process
    page = client.post(new_url(world), openai_form(client, new_url(world))).content.decode()
    problem = error(page, "cfg__openai__base_url")
    assert "base_url" in problem and "127.0.0.1" in problem
    assert not Agent.objects.filter(slug="writer").exists()


def test_changing_the_kind_drops_the_secrets_the_new_kind_does_not_take(
    client, world, settings, make_agent
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    agent = make_agent(
        world["a"],
        "proxy",
        kind="a2a-proxy",
        config={"card_url": "http://127.0.0.1:9/card.json"},
        executor_secrets={"token": "t-1", "api_key": "k-1"},
    )
    client.force_login(world["owner_a"])
    edit = agent_url(agent, "console:agent-edit")
    page = client.get(edit).content.decode()
    assert 'name="secret_remove__a2a_proxy__api_key"' in page  # stored: it can be removed
    assert "Set — leave empty to keep it." in group(page, "webhook")  # webhook takes a token
    # a2a-proxy -> webhook: the token stays, the api_key goes
    form = client.get(edit).context["form"]
    data = posted(form, executor_kind="webhook", cfg__webhook__url="http://127.0.0.1:9/hook")
    assert client.post(edit, data).status_code == 302
    agent.refresh_from_db()
    assert agent.executor_kind == "webhook"
    assert agent.executor_config["url"] == "http://127.0.0.1:9/hook"
    assert json.loads(decrypt(agent.executor_secrets_encrypted)) == {"token": "t-1"}
    # webhook -> echo, which takes none: they all go
    data = posted(client.get(edit).context["form"], executor_kind="echo")
    assert client.post(edit, data).status_code == 302
    agent.refresh_from_db()
    assert agent.executor_kind == "echo" and agent.executor_secrets_encrypted == ""
    assert agent.executor_config == {"input_required": False, "delay_seconds": 0.0}


# --- test connection -------------------------------------------------------------------------


class _Outside(BaseHTTPRequestHandler):
    """The outside world of the kinds: an OpenAI-compatible endpoint's model list (GET), and a
    tenant's webhook service (POST). Remembers what each request carried."""

    seen: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # noqa: N802
        self._seen(b"")
        if self.path != "/v1/models":
            self.send_error(404)
            return
        self._json(
            {"object": "list", "data": [{"id": "small-model", "object": "model", "created": 0}]}
        )

    def do_POST(self) -> None:  # noqa: N802
        self._seen(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if self.path != "/hook":
            self.send_error(404)
            return
        self._json({})

    def _seen(self, body: bytes) -> None:
        type(self).seen.append(
            {
                "request": f"{self.command} {self.path}",
                "authorization": self.headers.get("Authorization", ""),
                "signed": bool(self.headers.get("X-A2A-Signature")),
                "body": json.loads(body) if body else None,
            }
        )

    def _json(self, answer: Any) -> None:
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def outside() -> Iterator[str]:
    """The base URL of a real local server standing for the outside world."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Outside)
    _Outside.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_test_connection_is_for_the_tenants_owners_and_its_own_agents(client, world):
    agent_a, agent_b = world["agent_a"], world["agent_b"]
    data = {"executor_kind": "echo"}
    client.force_login(world["member_a"])  # looks, does not manage
    assert client.post(connection_url(agent_a), data).status_code == 403
    assert client.post(connection_url(tenant=world["a"]), data).status_code == 403
    client.force_login(world["member_b"])  # another tenant's: as if it did not exist
    assert client.post(connection_url(agent_a), data).status_code == 404
    assert client.post(connection_url(tenant=world["a"]), data).status_code == 404
    client.force_login(world["owner_a"])  # B's agent under A's name is no agent either
    wrong = reverse(
        "console:agent-test-connection",
        kwargs={"tenant_slug": world["a"].slug, "agent_slug": agent_b.slug},
    )
    assert client.post(wrong, data).status_code == 404
    assert client.get(connection_url(agent_a)).status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(world["owner_a"])
    assert strict.post(connection_url(agent_a), data).status_code == 403  # no CSRF token


def test_test_connection_checks_the_group_as_a_save_would(client, world):
    client.force_login(world["owner_a"])
    url = connection_url(tenant=world["a"])
    # echo reaches nothing: there is nothing to test
    response = client.post(url, {"executor_kind": "echo"})
    assert response.status_code == 400
    assert response.json() == {
        "ok": False,
        "message": "The echo executor reaches no outside service: there is nothing to test.",
    }
    # an invalid group: its field errors, nothing tried
    data = openai_form(
        client, new_url(world), cfg__openai__temperature="5", secret__openai__api_key=SECRET
    )
    response = client.post(url, data)
    answer = response.json()
    assert response.status_code == 400 and answer["ok"] is False
    assert "less than or equal to 2" in " ".join(answer["errors"]["cfg__openai__temperature"])
    assert "Temperature:" in answer["message"]
    # a URL the guard refuses is reported on its field, not tried
    answer = client.post(url, openai_form(client, new_url(world))).json()
    assert answer["ok"] is False and "base_url" in answer["errors"]["cfg__openai__base_url"][0]
    assert SECRET not in json.dumps(answer)
    # the agent page offers the test only for a kind that has one
    assert (
        'id="agent-test-connection"' not in client.get(agent_url(world["agent_a"])).content.decode()
    )


# Committed: the ping is signed with the tenant's key, read on the platform's own DB threads.
@pytest.mark.django_db(transaction=True)
def test_test_connection_pings_a_local_webhook_service(client, world, settings, outside):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    form = client.get(new_url(world)).context["form"]
    data = posted(
        form,
        slug="bridge",
        executor_kind="webhook",
        cfg__webhook__url=outside + "/hook",
        secret__webhook__token="t-secret-1",
    )
    # the test names the agent it is for: a new agent needs its slug first
    answer = client.post(connection_url(tenant=world["a"]), {**data, "slug": ""}).json()
    assert answer["ok"] is False and "slug" in answer["errors"] and _Outside.seen == []
    response = client.post(connection_url(tenant=world["a"]), data)
    answer = response.json()
    assert response.status_code == 200 and answer["ok"] is True, answer
    assert "HTTP 200" in answer["message"] and "t-secret-1" not in response.content.decode()
    [ping] = _Outside.seen
    assert ping["request"] == "POST /hook" and ping["signed"]
    assert ping["authorization"] == "Bearer t-secret-1"
    assert ping["body"]["ping"] is True and ping["body"]["agent"] == f"{world['a'].slug}/bridge"
    assert not Agent.objects.filter(slug="bridge").exists()  # tested, not saved


def test_test_connection_reaches_a_local_model_server(client, world, settings, make_agent, outside):
    model_server = outside + "/v1"
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    # a new agent: with the key typed in the form
    data = openai_form(
        client,
        new_url(world),
        cfg__openai__base_url=model_server,
        secret__openai__api_key=SECRET,
    )
    response = client.post(connection_url(tenant=world["a"]), data)
    answer = response.json()
    assert response.status_code == 200, answer
    assert answer["ok"] is True and "small-model among them" in answer["message"]
    assert [seen["authorization"] for seen in _Outside.seen] == [f"Bearer {SECRET}"]
    assert SECRET not in response.content.decode()
    # an existing agent: the stored key where none is typed, a typed one where it is
    agent = make_agent(
        world["a"],
        "writer",
        kind="openai",
        config={"base_url": model_server, "model": "other-model"},
        executor_secrets={"api_key": SECRET},
    )
    edit = agent_url(agent, "console:agent-edit")
    answer = client.post(connection_url(agent), posted(client.get(edit).context["form"])).json()
    assert answer["ok"] is True and "other-model is not among them" in answer["message"]
    data = posted(client.get(edit).context["form"], secret__openai__api_key=OTHER_SECRET)
    assert client.post(connection_url(agent), data).json()["ok"] is True
    # the agent page tests it as stored
    page = client.get(agent_url(agent)).content.decode()
    assert 'id="agent-test-connection"' in page and 'role="status"' in page
    assert client.post(connection_url(agent)).json()["ok"] is True
    sent = [seen["authorization"] for seen in _Outside.seen[1:]]
    assert sent == [f"Bearer {SECRET}", f"Bearer {OTHER_SECRET}", f"Bearer {SECRET}"]
    # an endpoint that is not there: the kind's one line, ok false
    data = posted(client.get(edit).context["form"], cfg__openai__base_url=model_server + "/x")
    answer = client.post(connection_url(agent), data).json()
    assert answer["ok"] is False and answer["message"]
    assert SECRET not in json.dumps(answer)


def test_init_kwargs_the_class_does_not_take_are_refused_on_their_field(client, world, settings):
    settings.A2A_PYTHON_EXECUTORS = [
        "tests.agents.sample_executors.ShoutingExecutor",
        "tests.agents.sample_executors.GreetingExecutor",
    ]
    client.force_login(world["owner_a"])
    url = new_url(world)
    form = client.get(url).context["form"]
    fields = {"slug": "py", "name": "Py", "description": "d", "executor_kind": "python"}
    # a keyword the constructor does not take: on init_kwargs, nothing saved
    data = posted(
        form,
        **fields,
        cfg__python__class_path="tests.agents.sample_executors.ShoutingExecutor",
        cfg__python__init_kwargs='{"sufix": "?"}',
    )
    page = client.post(url, data).content.decode()
    assert error(page, "cfg__python__init_kwargs") == (
        "tests.agents.sample_executors.ShoutingExecutor takes no keyword argument sufix (it "
        "takes suffix)."
    )
    # one it needs, given neither there nor as a secret: on init_kwargs too
    data.update(
        cfg__python__class_path="tests.agents.sample_executors.GreetingExecutor",
        cfg__python__init_kwargs="{}",
    )
    page = client.post(url, data).content.decode()
    assert "needs greeting: give it in init_kwargs, or as a secret." in error(
        page, "cfg__python__init_kwargs"
    )
    assert not Agent.objects.filter(slug="py").exists()
    # given as a secret, the agent is registered
    data["executor_secrets"] = '{"greeting": "Hello"}'
    response = client.post(url, data)
    assert response.status_code == 302, error(response.content.decode(), "executor_secrets")
    assert Agent.objects.get(tenant=world["a"], slug="py").executor_config["init_kwargs"] == {}
