"""What the console and the admin take in one request, and how they refuse the rest: a body over
A2A_CONSOLE_MAX_REQUEST_BYTES, more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS, a multipart
body that cannot be read, a Host the platform does not serve. Each gets the console's own page
(or JSON, to a script asking for it) naming the limit, a fitting status, one line in the log and
no traceback; the A2A endpoints keep their own formats. Then every field of the console's forms
within its bound, and the filters."""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import urlencode

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.urls import reverse

from agents import limits
from agents.admin import AgentForm
from agents.executors.secrets import SECRET_MAX_LENGTH, SECRETS_MAX
from agents.models import Agent, ApiKey
from tests.test_settings import start

from .test_agent_kinds import error, new_url, openai_form, posted
from .test_agent_pages import agent_url

pytestmark = pytest.mark.django_db

LOCAL = ["127.0.0.0/8"]
SMALL = 20_000  # a console limit small enough to cross quickly


def reason(page: str) -> str:
    found = re.search(r'<p id="refusal-reason">(.*?)</p>', page, re.S)
    assert found, page[:2000]
    return found[1].replace("&#x27;", "'")


def one_quiet_line(caplog: pytest.LogCaptureFixture, status: int) -> None:
    """The refusal was logged as one warning, and nothing was logged with a traceback."""
    assert all(record.exc_info is None for record in caplog.records), [
        (r.name, r.getMessage()) for r in caplog.records if r.exc_info
    ]
    lines = [r for r in caplog.records if r.name == "console.refusals"]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING, caplog.records
    assert getattr(lines[0], "status_code", None) == status
    assert "\n" not in lines[0].getMessage()


# --- the body ---------------------------------------------------------------------------------


def test_a_form_over_the_console_limit_gets_the_413_page_naming_it(client, world, settings, caplog):
    settings.A2A_CONSOLE_MAX_REQUEST_BYTES = SMALL
    client.force_login(world["owner_a"])
    data = {"slug": "big", "name": "Big", "executor_kind": "echo", "description": "d" * SMALL}
    with caplog.at_level(logging.INFO):
        response = client.post(new_url(world), data)
    assert response.status_code == 413
    page = response.content.decode()
    assert "<title>Too large to send · A2A platform</title>" in page
    assert 'class="brand"' in page and "owner_a" in page  # the console's page, logged in
    sent = int(response.wsgi_request.META["CONTENT_LENGTH"])
    assert reason(page) == (
        f"This request sent {sent:,} bytes; the console and the admin take at most 20,000 "
        "bytes in one request (A2A_CONSOLE_MAX_REQUEST_BYTES). Nothing was saved: go back, "
        "shorten what you typed or pasted, and send it again."
    )
    assert not Agent.objects.filter(slug="big").exists()
    one_quiet_line(caplog, 413)
    # just under it, the same form is read and answered as a form (the description's bound)
    data["description"] = "d" * (limits.AGENT_DESCRIPTION + 1)
    page = client.post(new_url(world), data).content.decode()
    assert "Ensure this value has at most 4000 characters (it has 4001)." in page


def test_test_connection_gets_json_naming_the_limit(client, world, settings):
    settings.A2A_CONSOLE_MAX_REQUEST_BYTES = SMALL
    client.force_login(world["owner_a"])
    url = reverse("console:agent-test-connection", kwargs={"tenant_slug": world["a"].slug})
    response = client.post(
        url,
        {"executor_kind": "openai", "cfg__openai__system_prompt": "p" * SMALL},
        HTTP_ACCEPT="application/json",
    )
    assert response.status_code == 413
    answer = response.json()
    assert answer["ok"] is False and "A2A_CONSOLE_MAX_REQUEST_BYTES" in answer["message"]


def test_the_admin_gets_the_same_page(admin_client, settings, caplog):
    settings.A2A_CONSOLE_MAX_REQUEST_BYTES = SMALL
    with caplog.at_level(logging.INFO):
        response = admin_client.post(
            "/admin/agents/tenant/add/", {"slug": "big", "name": "n" * SMALL}
        )
    assert response.status_code == 413
    assert "A2A_CONSOLE_MAX_REQUEST_BYTES" in reason(response.content.decode())
    one_quiet_line(caplog, 413)


def test_the_largest_form_of_the_console_and_the_admin_is_under_the_default_limit():
    """The admin's agent form with every text at its bound, in a script of three-byte UTF-8
    characters form-encoded (nine bytes each), is what A2A_CONSOLE_MAX_REQUEST_BYTES must
    take: the console's registration form is a part of it."""
    wide = "\u3042"  # three bytes in UTF-8, %E3%81%82 form-encoded
    # the skills' JSON at its bound (as the form shows JSON: characters unescaped)
    skills = json.dumps([{"description": wide * (limits.SKILLS_JSON - 21)}], ensure_ascii=False)
    assert len(skills) <= limits.SKILLS_JSON
    secrets = {f"s{n}": "k" * SECRET_MAX_LENGTH for n in range(SECRETS_MAX)}
    prompt = wide * 100_000
    config = {"base_url": "https://" + "h" * (limits.URL - 8), "model": "m" * 200}
    data: dict[str, Any] = {name: "" for name in AgentForm().fields}
    data.update(
        name=wide * limits.AGENT_NAME,
        description=wide * limits.AGENT_DESCRIPTION,
        version=wide * limits.AGENT_VERSION,
        documentation_url="https://" + "d" * (limits.URL - 8),
        icon_url="https://" + "i" * (limits.URL - 8),
        provider_url="https://" + "p" * (limits.URL - 8),
        provider_organization=wide * limits.PROVIDER_ORGANIZATION,
        custom_domain="c" * 253,
        skills=skills,
        extended_skills=skills,
        default_input_modes=json.dumps(["a/" + "b" * (limits.MODE - 2)] * limits.MODES),
        default_output_modes=json.dumps(["a/" + "b" * (limits.MODE - 2)] * limits.MODES),
        # the config twice, as the admin shows it: the kind's fields and the JSON object
        executor_config=json.dumps({**config, "system_prompt": prompt}, ensure_ascii=False),
        cfg__openai__system_prompt=prompt,
        cfg__openai__base_url=config["base_url"],
        cfg__openai__model=config["model"],
        secret__openai__api_key="k" * SECRET_MAX_LENGTH,
        executor_secrets=json.dumps(secrets),
    )
    size = len(urlencode(data).encode())
    assert 3_000_000 < size < django_settings.A2A_CONSOLE_MAX_REQUEST_BYTES, size


def test_a_large_form_within_every_bound_is_saved(client, world, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    url = new_url(world)
    wide = "\u3042"
    data = openai_form(
        client,
        url,
        description=wide * limits.AGENT_DESCRIPTION,
        cfg__openai__system_prompt=wide * 100_000,
    )
    body = urlencode(data, doseq=True).encode()  # a value per ticked box
    assert len(body) > 900_000  # form-encoded as a browser does it
    response = client.generic("POST", url, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 302, error(response.content.decode(), "description")
    agent = Agent.objects.get(tenant=world["a"], slug=data["slug"])
    assert agent.executor_config["system_prompt"] == wide * 100_000


def test_the_console_limit_is_a_setting_checked_at_start():
    result = start(A2A_CONSOLE_MAX_REQUEST_BYTES="0")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "A2A_CONSOLE_MAX_REQUEST_BYTES" in result.stderr
    started = start("A2A_CONSOLE_MAX_REQUEST_BYTES", A2A_CONSOLE_MAX_REQUEST_BYTES="1048576")
    assert started.stdout.strip() == "1048576", started.stderr


# --- fields, multipart, host ------------------------------------------------------------------


def test_too_many_fields_get_the_400_page_naming_the_limit(client, world, caplog):
    client.force_login(world["owner_a"])
    fields = {f"f{n}": "x" for n in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)}
    with caplog.at_level(logging.INFO):
        response = client.post(new_url(world), fields)
    assert response.status_code == 400
    assert reason(response.content.decode()) == (
        "This request sent more than 1,000 fields (DATA_UPLOAD_MAX_NUMBER_FIELDS), in its "
        "query or its form; no page of the console has that many. Nothing was saved."
    )
    one_quiet_line(caplog, 400)
    response = client.get(reverse("console:tasks") + "?" + urlencode(fields))
    assert response.status_code == 400
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in reason(response.content.decode())


def test_a_malformed_multipart_body_gets_the_400_page(client, world, caplog):
    client.force_login(world["owner_a"])
    with caplog.at_level(logging.INFO):
        response = client.generic(
            "POST", new_url(world), b"--x\r\nnot a part", content_type="multipart/form-data"
        )
    assert response.status_code == 400
    assert reason(response.content.decode()).startswith(
        "This request's multipart/form-data body could not be read (Invalid boundary"
    )
    one_quiet_line(caplog, 400)


def test_an_unknown_host_gets_the_console_page_and_the_a2a_paths_keep_their_format(client, caplog):
    with caplog.at_level(logging.INFO):
        response = client.get("/console/", HTTP_HOST="elsewhere.example.org")
    assert response.status_code == 400
    assert reason(response.content.decode()) == (
        "The Host header of this request names no host this platform serves."
    )
    one_quiet_line(caplog, 400)
    response = client.post("/a2a/acme/helper/", b"{}", "application/json", HTTP_HOST="x.example")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600  # JSON-RPC's envelope, as before


# --- the console's own forms ------------------------------------------------------------------


def maxlength(page: str, name: str) -> int:
    """The maxlength of the input or textarea named `name`."""
    tag = re.search(rf'<(?:input|textarea)\b[^>]*\bname="{name}"[^>]*>', page)
    assert tag, name
    found = re.search(r'\bmaxlength="(\d+)"', tag[0])
    assert found, tag[0]
    return int(found[1])


def test_the_registration_form_says_each_bound_in_the_page(client, world):
    client.force_login(world["owner_a"])
    page = client.get(new_url(world)).content.decode()
    assert maxlength(page, "name") == limits.AGENT_NAME
    assert maxlength(page, "description") == limits.AGENT_DESCRIPTION
    assert maxlength(page, "version") == limits.AGENT_VERSION
    assert maxlength(page, "custom_domain") == 253
    assert maxlength(page, "cfg__webhook__url") == limits.URL
    assert maxlength(page, "cfg__openai__system_prompt") == 100_000
    assert maxlength(page, "secret__openai__api_key") == SECRET_MAX_LENGTH


def test_the_registration_form_refuses_each_field_over_its_bound(client, world, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    client.force_login(world["owner_a"])
    url = new_url(world)
    data = openai_form(
        client,
        url,
        name="n" * 201,
        description="d" * 4001,
        skills=json.dumps([{"id": "s", "name": "S", "description": "d" * 1001, "tags": ["t"]}]),
        default_input_modes=json.dumps(["text/plain"] * 11),
        cfg__openai__model="m" * 201,
        secret__openai__api_key="k" * (SECRET_MAX_LENGTH + 1),
    )
    page = client.post(url, data).content.decode()
    assert "at most 200 characters (it has 201)" in error(page, "name")
    assert "at most 4000 characters (it has 4001)" in error(page, "description")
    assert error(page, "skills") == (
        "Skill #1: description must be at most 1,000 characters long (it has 1,001)."
    )
    assert error(page, "default_input_modes") == "The list must have at most 10 items (it has 11)."
    assert error(page, "cfg__openai__model") == (
        "Model must be at most 200 characters long (it has 201)."
    )
    assert error(page, "secret__openai__api_key") == (
        "api_key: the secret is longer than 8192 characters."
    )
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_json_nested_too_deeply_is_a_field_error(client, world, admin_client):
    client.force_login(world["owner_a"])
    url = new_url(world)
    data = posted(
        client.get(url).context["form"],
        slug="deep",
        name="Deep",
        description="d",
        executor_kind="echo",
        skills="[" * 100_000,
    )
    response = client.post(url, {**data, "executor_secrets": "[" * 100_000})
    assert response.status_code == 200
    page = response.content.decode()
    assert error(page, "skills") == "Not valid JSON here: it is nested too deeply."
    assert error(page, "executor_secrets").startswith("Not valid JSON: give an object")
    response = admin_client.post(
        "/admin/agents/apikey/add/",
        {"tenant": world["a"].pk, "name": "k", "scopes": "[" * 100_000},
    )
    assert response.status_code == 200
    assert "nested too deeply" in response.content.decode()
    assert not ApiKey.objects.filter(name="k").exists()


def test_an_api_key_name_over_its_bound_is_said_and_nothing_made(client, world):
    client.force_login(world["owner_a"])
    agent = world["agent_a"]
    response = client.post(agent_url(agent, "console:key-create"), {"name": "k" * 201}, follow=True)
    assert "API key not created: name: Ensure this value has at most 200 characters" in (
        response.content.decode()
    )
    assert not ApiKey.objects.filter(tenant=world["a"]).exists()


def test_a_person_is_added_only_within_the_account_models_bounds(client, world):
    client.force_login(world["owner_a"])
    add = reverse("console:person-add", kwargs={"tenant_slug": world["a"].slug})
    long_email = "e" * 250 + "@example.org"  # an address Django's validator takes, too long
    for data, problem in (
        ({"username": "newcomer", "email": long_email}, "email: Ensure this value has at most 254"),
        ({"username": "u" * 151}, "username: Ensure this value has at most 150"),
    ):
        response = client.post(add, {"role": "member", **data}, follow=True)
        assert response.status_code == 200
        assert f"Nobody added: {problem}" in response.content.decode()
    assert not get_user_model().objects.filter(username__in=["newcomer", "u" * 151]).exists()


# --- the filters ------------------------------------------------------------------------------


def test_filters_over_their_bounds_are_explained_not_failed(client, world):
    client.force_login(world["owner_a"])
    tasks = reverse("console:tasks")
    page = client.get(tasks, {"context": "c" * 201}).content.decode()
    assert "Context id (context): Ensure this value has at most 200 characters" in page
    page = client.get(tasks, {"state": "S" * 5000, "agent": "a/" + "b" * 5000}).content.decode()
    assert "is not a task state" in page and "not an agent you can see" in page
    assert "b" * 5000 not in page  # another tenant's names are never echoed
    page = client.get(tasks, {"after": "z" * 8000}).content.decode()
    assert "Page (after): this is not a page link this console made" in page
    deliveries = reverse("console:deliveries")
    assert client.get(deliveries, {"agent": "a/" + "b" * 5000}).status_code == 404
    assert client.get(deliveries, {"state": "x" * 5000, "page": "9" * 5000}).status_code == 200
    charts = reverse("console:charts")
    assert client.get(charts, {"range": "r" * 5000}).status_code == 200


def test_json_holding_text_the_database_cannot_keep_is_a_field_error(client, world):
    client.force_login(world["owner_a"])
    url = new_url(world)
    skills = '[{"id": "s", "name": "S\\u0000", "description": "d"}]'
    data = posted(
        client.get(url).context["form"],
        slug="nul",
        name="Nul",
        description="d",
        executor_kind="echo",
        skills=skills,
    )
    response = client.post(url, data)
    assert response.status_code == 200
    assert error(response.content.decode(), "skills") == "Text here must not contain U+0000 (NUL)."
    assert not Agent.objects.filter(slug="nul").exists()
