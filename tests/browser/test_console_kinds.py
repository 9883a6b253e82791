"""Registering the agents a tenant needs no code for, in a real browser against the live
platform: one agent of each kind (`openai` on a local OpenAI-compatible server, `a2a-proxy` in
front of another tenant's agent, `webhook` on the documented example service), each with its
connection tested from the form before it is saved, then called with Try it. Each outcome is
looked at on the page and in the database, and saved as a screenshot."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from agents.executors.secrets import executor_secret_names
from agents.models import Agent, Membership
from tasks_app.models import Task

from ..e2e.fake_openai import FakeOpenAI
from ..e2e.tenant_service import ExampleService
from .test_console import PASSWORD, Shot, expect, log_in

if TYPE_CHECKING:
    from pathlib import Path

    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@dataclass
class Kind:
    """One registration: the kind, its group's fields and secrets as typed, the answer the
    connection test gives, and what Try it must show."""

    name: str
    slug: str
    fields: dict[str, str]
    secrets: dict[str, str]
    connected: str
    answer: str


@pytest.fixture
def model_server() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def test_an_owner_registers_an_agent_of_each_kind_tests_it_and_tries_it(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
    make_agent: Any,
    make_key: Any,
    model_server: FakeOpenAI,
    tmp_path: Path,
) -> None:
    # given: an owner of a tenant; outside it, a model server, another tenant's private agent,
    # and the tenant's own service (the documented example, checking the platform's signature)
    base = live_platform.url
    tenant = make_tenant()
    owner = django_user_model.objects.create_user("kinds-owner", password=PASSWORD)
    Membership.objects.create(user=owner, tenant=tenant, role="owner")
    elsewhere = make_tenant()
    upstream = make_agent(elsewhere, "upstream")
    upstream_key = make_key(elsewhere, "for-the-proxy")
    token = secrets.token_urlsafe(24)
    service = ExampleService(
        tmp_path / "service", jwks=f"{base}/a2a/{tenant.slug}/.well-known/jwks.json", token=token
    ).start()
    model_key = "sk-" + secrets.token_urlsafe(24)
    kinds = [
        Kind(
            "openai",
            "openai",
            {"base_url": model_server.url, "model": "echo", "system_prompt": "Be brief."},
            {"api_key": model_key},
            f"Reached {model_server.url}:",
            "the last: hello model",
        ),
        Kind(
            "a2a-proxy",
            "a2a_proxy",
            {"card_url": f"{live_platform.agent_url(upstream)}.well-known/agent-card.json"},
            {"api_key": upstream_key},
            "Reached Upstream 1.0.0: JSONRPC, HTTP+JSON, GRPC; streams.",
            "hello upstream",
        ),
        Kind(
            "webhook",
            "webhook",
            {"url": service.url},
            {"token": token},
            "Your service answered HTTP 200",
            "You said: hello service",
        ),
    ]
    try:
        log_in(page, base, "kinds-owner")
        for number, kind in enumerate(kinds):
            _register_test_and_try(page, base, tenant.slug, kind, screenshot, 40 + 3 * number)
    finally:
        service.stop()

    # then: each agent stored with its config and its secrets (encrypted, names only shown)
    for kind in kinds:
        agent = Agent.objects.get(tenant=tenant, slug=f"my-{kind.slug.replace('_', '-')}")
        assert agent.executor_kind == kind.name
        assert {k: agent.executor_config[k] for k in kind.fields} == kind.fields
        assert executor_secret_names(agent.executor_secrets_encrypted) == sorted(kind.secrets)
        for value in kind.secrets.values():
            assert value not in agent.executor_secrets_encrypted
        task = Task.objects.get(agent=agent)
        assert task.state == "TASK_STATE_COMPLETED", (kind.name, task.status_message)
    # the model server heard the platform: the test's listing and the run, with the key
    assert any(c.path.endswith("/models") for c in model_server.calls())
    (run,) = [c for c in model_server.calls() if c.path.endswith("/chat/completions")]
    assert run.headers["authorization"] == f"Bearer {model_key}"
    assert run.messages[0] == {"role": "system", "content": "Be brief."}
    # the example service verified every request it answered (a bad signature is refused)
    assert "refused" not in service.output(), service.output()
    assert not js_errors, js_errors


def _register_test_and_try(
    page: Page, base: str, tenant: str, kind: Kind, screenshot: Shot, shot: int
) -> None:
    slug = f"my-{kind.slug.replace('_', '-')}"
    page.goto(f"{base}/console/t/{tenant}/agents/new/")
    page.fill("#id_slug", slug)
    page.fill("#id_name", f"My {kind.name}")
    page.fill("#id_description", f"An agent of kind {kind.name}.")
    page.select_option("#id_executor_kind", kind.name)
    group = page.locator(f"#kind-{kind.slug}")
    expect(group).to_be_visible()
    expect(page.locator(".kind-group:visible")).to_have_count(1)  # only the chosen kind's
    for field, value in kind.fields.items():
        page.fill(f"#id_cfg__{kind.slug}__{field}", value)
    for name, value in kind.secrets.items():
        page.fill(f"#id_secret__{kind.slug}__{name}", value)

    # test connection, before anything is saved
    group.locator("[data-test-connection]").click()
    status = page.locator(f"#test-status-{kind.slug}")
    expect(status).to_have_attribute("data-ok", "true")
    expect(status).to_contain_text("Connected: " + kind.connected)
    screenshot(page, f"{shot}-{kind.slug}-test-connection")
    assert not Agent.objects.filter(slug=slug).exists()

    # saved: the agent's page; its secrets are not on it
    page.click("form:has(#id_slug) [type=submit]")
    expect(page).to_have_url(f"{base}/console/t/{tenant}/a/{slug}/")
    for value in kind.secrets.values():
        assert value not in page.content()
    screenshot(page, f"{shot + 1}-{kind.slug}-agent")

    # Try it, as the owner (no key): the stream ends completed with the kind's answer
    page.fill("#tryit-text", "hello " + kind.answer.split()[-1])
    page.click("#tryit-send")
    events = page.locator("#tryit-log li.event")
    expect(events.last).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    expect(page.locator("#tryit-log")).to_contain_text(kind.answer)
    screenshot(page, f"{shot + 2}-{kind.slug}-tryit")
