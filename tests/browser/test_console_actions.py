"""The console acting in a real browser against the live platform (daphne, a Celery worker,
PostgreSQL): an owner replies to a task that asked for input and cancels a running one from
the task page, both tasks started by an API key's client, and sends a message with Try it, all
as themselves with no key typed (each action then listed on the task's page); edits, disables
and deletes an agent, and invites a person who then sets a password and logs in; the agents and
task pages at phone width. Each result is looked at on the page and in the database, and saved
as a screenshot."""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agents.models import Agent, Membership
from tasks_app.models import Task

from ..e2e.helpers import Target, rpc_send, wait_until
from .test_console import (
    PASSWORD,
    Shot,
    expect,  # None without playwright: conftest's require() says so
    log_in,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def _fits_the_width(page: Page) -> None:
    """Nothing sticks out sideways: the page scrolls only downwards."""
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{page.url} is {overflow} px wider than the screen"


def _agent_answer(live_platform: Any, agent: Agent, key: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}
    with httpx.Client(timeout=30) as http:
        response = http.post(
            live_platform.agent_url(agent),
            json=body,
            headers={"X-API-Key": key, "A2A-Version": "1.0"},
        )
    return response.json()


def test_an_owner_replies_cancels_edits_disables_deletes_and_invites(
    live_platform: Any,
    browser: Browser,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
    make_agent: Any,
    make_key: Any,
) -> None:
    # given: an owner of a tenant with an agent that asks for input and one that is slow
    base = live_platform.url
    tenant = make_tenant()
    owner = django_user_model.objects.create_user("owner", password=PASSWORD)
    Membership.objects.create(user=owner, tenant=tenant, role="owner")
    asker = make_agent(tenant, "asker", config={"input_required": True})
    slow = make_agent(tenant, "slow", config={"delay_seconds": 60})
    key = make_key(tenant)
    with httpx.Client(timeout=60) as http:
        asked = rpc_send(http, Target(live_platform.agent_url(asker), key, asker), "first")
        running = rpc_send(
            http,
            Target(live_platform.agent_url(slow), key, slow),
            "take your time",
            returnImmediately=True,
        )
    asked, running = asked["task"], running["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    log_in(page, base, "owner")

    # the follow-up reply: typed on the task page (no key asked for: the owner acts as
    # themselves), the page follows the task to its end and lists the reply as theirs
    page.goto(f"{base}/console/t/{tenant.slug}/tasks/{asked['id']}/")
    expect(page.locator("#task-state")).to_have_text("TASK_STATE_INPUT_REQUIRED")
    expect(page.locator("#reply-form")).to_be_visible()
    expect(page.locator("#actions input[type=password]")).to_have_count(0)
    page.fill("#reply-text", "second, from the task page")
    screenshot(page, "20-task-reply")
    page.click("#reply-form [type=submit]")
    expect(page.locator("#action-status")).to_contain_text("Reply: accepted")
    expect(page.locator("#task-state")).to_have_text("TASK_STATE_COMPLETED")
    expect(page.locator("#history")).to_contain_text("second, from the task page")
    expect(page.locator("#actions")).to_be_hidden()
    expect(page.locator("#action-log li")).to_have_count(1)
    expect(page.locator("#action-log")).to_contain_text("owner · Replied (as owner)")
    screenshot(page, "21-task-replied")
    replied = Task.objects.get(pk=asked["id"])
    assert replied.state == "TASK_STATE_COMPLETED" and replied.owner == "key:key", replied.owner

    # cancel: asked to confirm, then the task page shows it canceled, and who did it
    page.goto(f"{base}/console/t/{tenant.slug}/tasks/{running['id']}/")
    expect(page.locator("#reply-form")).to_be_hidden()  # it did not ask for input
    expect(page.locator("#console-actions")).to_be_hidden()  # nothing done to it yet
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.click("#cancel-task")
    expect(page.locator("#task-state")).to_have_text("TASK_STATE_CANCELED")
    assert questions and "Cancel this task?" in questions[0], questions
    expect(page.locator("#action-log")).to_contain_text("Canceled the task (as owner).")
    screenshot(page, "22-task-canceled")
    assert Task.objects.get(pk=running["id"]).state == "TASK_STATE_CANCELED"
    page.reload()  # the record is the server's, not only the script's
    expect(page.locator("#action-log")).to_contain_text("owner · Canceled the task (as owner).")

    # the task page at phone width
    page.set_viewport_size(PHONE)
    page.reload()
    expect(page.locator("#task-state")).to_have_text("TASK_STATE_CANCELED")
    _fits_the_width(page)
    screenshot(page, "23-phone-task")

    # the agents pages at phone width
    page.goto(f"{base}/console/")
    expect(page.locator(f'a[href="/console/t/{tenant.slug}/a/asker/"]')).to_be_visible()
    _fits_the_width(page)
    screenshot(page, "24-phone-agents")
    page.goto(f"{base}/console/t/{tenant.slug}/a/asker/")
    expect(page.locator("#agent-actions")).to_be_visible()
    _fits_the_width(page)
    screenshot(page, "25-phone-agent")
    page.set_viewport_size({"width": 1280, "height": 900})

    # Try it, as the owner with no key: the stream shows the agent asking for input, and the
    # new task is the owner's own
    expect(page.locator("#tryit input[type=password]")).to_have_count(0)
    page.fill("#tryit-text", "from Try it")
    page.click("#tryit-send")
    events = page.locator("#tryit-log li.event")
    expect(events.last).to_have_attribute("data-state", "TASK_STATE_INPUT_REQUIRED")
    expect(page.locator("#tryit-status")).to_have_text("Stream ended.")
    link = page.locator("#tryit-task-link")
    expect(link).to_be_visible()
    tried = (link.get_attribute("href") or "").rstrip("/").rpartition("/")[2]
    assert Task.objects.get(pk=tried).owner == "user:owner"
    link.click()
    expect(page.locator("#action-log")).to_contain_text("Sent from Try it (as owner)")
    expect(page.locator("#action-log")).to_contain_text("“from Try it”")
    page.go_back()
    expect(page).to_have_url(f"{base}/console/t/{tenant.slug}/a/asker/")

    # edit: a new name and description, on the page and in the card
    page.click("#agent-edit")
    expect(page.locator("#id_slug")).to_have_count(0)
    page.fill("#id_name", "Asker, renamed")
    page.fill("#id_description", "Asks first, then echoes.")
    screenshot(page, "26-agent-edit")
    page.click("form:has(#id_name) [type=submit]")
    expect(page).to_have_url(f"{base}/console/t/{tenant.slug}/a/asker/")
    expect(page.locator("main h1")).to_contain_text("Asker, renamed")
    expect(page.locator("#card-json")).to_contain_text('"description": "Asks first, then echoes."')

    # disable: asked to confirm; then the agent's URLs answer "not found"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#agent-toggle")
    expect(page.locator("#agent-disabled-note")).to_be_visible()
    expect(page.locator("#tryit-off-note")).to_contain_text("This agent is disabled")
    expect(page.locator("#tryit-form")).to_have_count(0)
    screenshot(page, "27-agent-disabled")
    wait_until(
        lambda: "error" in _agent_answer(live_platform, asker, key),
        what="the disabled agent's endpoint to answer 'agent not found'",
    )
    refusal = json.dumps(_agent_answer(live_platform, asker, key))
    assert "No agent 'asker'" in refusal and "result" not in refusal, refusal

    # delete: the page says what goes with it; the slug is typed; the agent and tasks are gone
    page.click("#agent-delete")
    expect(page.locator('#delete-counts [data-count="tasks"]')).to_have_text("2")
    time.sleep(1.5)  # a deletion waits A2A_AUTH_CACHE_SECONDS (1) after disabling
    page.fill("#confirm-slug", "asker")
    screenshot(page, "28-agent-delete")
    page.click("#delete-agent [type=submit]")
    expect(page).to_have_url(f"{base}/console/")
    expect(page.locator(".messages")).to_contain_text("Agent asker deleted, with its 2 tasks")
    expect(page.locator(f'a[href="/console/t/{tenant.slug}/a/asker/"]')).to_have_count(0)
    assert not Agent.objects.filter(pk=asker.pk).exists()
    assert not Task.objects.filter(pk__in=[asked["id"], tried]).exists()
    assert Task.objects.filter(pk=running["id"]).exists()  # the other agent's task stays

    # people: invite someone new as a member; the link is shown once
    page.click(f'a[href="/console/t/{tenant.slug}/people/"]')
    page.fill("#person-form #id_username", "newcomer")
    page.fill("#person-form #id_email", "newcomer@example.org")
    page.select_option("#person-form #id_role", "member")
    page.click("#person-form [type=submit]")
    link = page.locator("#invite-link").inner_text().strip()
    expect(page.locator('#people tr.person[data-username="newcomer"]')).to_have_attribute(
        "data-role", "member"
    )
    screenshot(page, "29-people-invited")

    # the newcomer sets a password by the link, logs in, and sees the tenant's agents
    other = browser.new_context()
    newcomer = other.new_page()
    try:
        newcomer.goto(link)
        expect(newcomer.locator("main h1")).to_have_text("Welcome, newcomer")
        new_password = f"pw-{uuid.uuid4()}"
        newcomer.fill("#id_new_password1", new_password)
        newcomer.fill("#id_new_password2", new_password)
        newcomer.click("form [type=submit]")
        expect(newcomer).to_have_url(f"{base}/console/login/")
        newcomer.fill("#id_username", "newcomer")
        newcomer.fill("#id_password", new_password)
        newcomer.click("form:has(#id_password) [type=submit]")
        expect(newcomer.locator(f'a[href="/console/t/{tenant.slug}/a/slow/"]')).to_be_visible()
        expect(newcomer.locator(f'a[href="/console/t/{tenant.slug}/agents/new/"]')).to_have_count(0)
    finally:
        other.close()

    # and the owner makes them an owner
    row = page.locator('#people tr.person[data-username="newcomer"]')
    row.locator("select[name=role]").select_option("owner")
    row.locator("button[type=submit]", has_text="Change").click()
    expect(page.locator(".messages")).to_contain_text("newcomer is now owner")
    expect(page.locator('#people tr.person[data-username="newcomer"]')).to_have_attribute(
        "data-role", "owner"
    )
    screenshot(page, "30-people-roles")
    assert js_errors == []
