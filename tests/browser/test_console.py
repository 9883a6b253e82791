"""The console in a real browser (Debian's Chromium, driven by Playwright) against the live
platform: daphne, a Celery worker and PostgreSQL, with data committed so those processes see it.

The operator's journey: log in, register an agent (a bad config first), create a key, send a
message from the Try-it console (as the operator, no key typed), follow the task link and
watch the task page change state live (no reload), find the task in the list; then the push
deliveries, charts and workers pages, populated. And isolation: a member of another tenant
gets the 404 page.

Each main page is saved as a screenshot (see conftest.py for where).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from a2a_platform.celery import app as celery_app
from agents.models import Membership
from console.models import JobFailure
from push_app.models import Delivery
from tasks_app.models import TERMINAL_STATES

from ..e2e.helpers import Target, message, mid, result_of, rpc, rpc_send, wait_until
from ..e2e.webhook import Receiver, answer

try:
    from playwright.sync_api import expect
except ImportError:  # conftest's require() names it: a failure in CI, a skip elsewhere
    expect = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PASSWORD = "a-browser-password"
Shot = Callable[["Page", str], Path]


# --- helpers ---------------------------------------------------------------------------------


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/console/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form:has(#id_password) [type=submit]")
    expect(page).to_have_url(f"{base}/console/")


@pytest.fixture
def receivers(tmp_path: Path) -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def start(**fields: Any) -> Receiver:
        receiver = Receiver(directory=tmp_path / "webhooks", **fields)
        made.append(receiver)
        return receiver.start()

    yield start
    for receiver in made:
        receiver.stop()


def push_deliveries(
    live_platform: Any, agent: Any, key: str, receivers: Callable[..., Receiver]
) -> str:
    """A task of `agent` (an echo agent asking for input) with two push configs, one on a
    receiver that accepts (delivered) and one on a receiver that answers 410 (dead), run to
    the end with every delivery settled; the task id."""
    target = Target(live_platform.agent_url(agent), key, agent)
    accepting, gone = receivers(), receivers(default=answer(410))
    with httpx.Client(timeout=60) as http:
        task = rpc_send(http, target, "first")["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
        for config_id, receiver in (("accepting", accepting), ("gone", gone)):
            params = {"taskId": task["id"], "id": config_id, "url": receiver.url + "/hook"}
            result_of(rpc(http, target, "CreateTaskPushNotificationConfig", params))
        follow_up = message("second", taskId=task["id"], contextId=task["contextId"])
        done = result_of(rpc(http, target, "SendMessage", {"message": follow_up}))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done

    def settled() -> bool:
        rows = Delivery.objects.filter(config__task_id=task["id"])
        states = {config_id: set() for config_id in ("accepting", "gone")}
        for config_id, state in rows.values_list("config__config_id", "state"):
            states[config_id].add(state)
        return states == {"accepting": {"delivered"}, "gone": {"dead"}}

    wait_until(settled, what="the deliveries to settle (accepting delivered, gone dead)")
    return task["id"]


# --- the operator's journey ------------------------------------------------------------------


def test_operator_journey(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
    make_agent: Any,
    make_key: Any,
    receivers: Callable[..., Receiver],
) -> None:
    # given: a tenant, and an operator (staff: every tenant, the workers page)
    base = live_platform.url
    tenant = make_tenant()
    django_user_model.objects.create_user("operator", password=PASSWORD, is_staff=True)

    # the login page
    page.goto(f"{base}/console/")
    expect(page).to_have_url(f"{base}/console/login/?next=/console/")
    expect(page.locator("#id_username")).to_be_visible()
    screenshot(page, "01-login")
    log_in(page, base, "operator")

    # the overview offers to register an agent in the tenant
    new_agent_url = f"/console/t/{tenant.slug}/agents/new/"
    register = page.locator(f'a[href="{new_agent_url}"]')
    expect(register).to_have_text("Register an agent")
    screenshot(page, "02-overview")
    register.click()
    expect(page).to_have_url(base + new_agent_url)

    # registration: the form filled in, then a config the echo kind refuses
    page.fill("#id_slug", "watcher")
    page.fill("#id_name", "Watcher")
    page.fill("#id_description", "Echoes, slowly enough to watch.")
    page.select_option("#id_executor_kind", "echo")
    page.fill("#id_cfg__echo__delay_seconds", "3")
    screenshot(page, "03-registration")
    page.fill("#id_cfg__echo__delay_seconds", "-1")
    page.click("form:has(#id_slug) [type=submit]")
    error = page.locator("#error-cfg__echo__delay_seconds")
    expect(error).to_contain_text("greater than or equal to 0")
    expect(page).to_have_url(base + new_agent_url)
    expect(page.locator("#id_slug")).to_have_value("watcher")  # the rest was kept
    screenshot(page, "04-registration-error")

    # registered with a good config: the agent's page, with its card
    page.fill("#id_cfg__echo__delay_seconds", "3")
    page.click("form:has(#id_slug) [type=submit]")
    agent_url = f"{base}/console/t/{tenant.slug}/a/watcher/"
    expect(page).to_have_url(agent_url)
    card = json.loads(page.locator("#card-json").inner_text())
    assert card["name"] == "Watcher", card
    assert card["description"] == "Echoes, slowly enough to watch.", card

    # a key: its secret shown once (for clients; Try it needs none)
    page.fill("#key-form #id_name", "browser")
    page.click("#key-form [type=submit]")
    expect(page).to_have_url(agent_url)
    secret = page.locator("#new-secret").inner_text().strip()
    assert secret.startswith("a2a_"), secret
    expect(page.locator("#tryit input[type=password]")).to_have_count(0)
    screenshot(page, "05-agent")

    # Try it, as the operator: the streamed events appear, then the link to the task
    page.fill("#tryit-text", "hello from the browser")
    page.click("#tryit-send")
    link = page.locator("#tryit-task-link")
    expect(link).to_be_visible()
    expect(page.locator("#tryit-log li.event").first).to_be_visible()
    href = link.get_attribute("href") or ""
    task_id = href.rstrip("/").rpartition("/")[2]
    assert href == f"/console/t/{tenant.slug}/tasks/{uuid.UUID(task_id)}/", href

    # followed in a new tab while the task still runs; this tab keeps streaming
    with page.context.expect_page() as opened:
        link.click(modifiers=["ControlOrMeta"])
    task_page = opened.value
    task_page.wait_for_load_state("domcontentloaded")
    expect(task_page).to_have_url(base + href)
    state = task_page.locator("#task-state")
    rows = task_page.locator("#timeline tr.event[data-seq]")
    first_state = state.inner_text().strip()
    first_rows = rows.count()
    assert first_state.startswith("TASK_STATE_"), first_state
    assert first_state not in TERMINAL_STATES, f"the task ended before its page came: {first_state}"
    task_page.evaluate("window.notReloaded = true")
    screenshot(task_page, "07-task-live")

    # the page follows the task to its end by itself: state, timeline, sections
    expect(state).to_have_text("TASK_STATE_COMPLETED")
    assert task_page.evaluate("window.notReloaded") is True, "the task page was reloaded"
    seqs = [int(s) for s in rows.evaluate_all("rows => rows.map(r => r.dataset.seq)")]
    assert len(seqs) > first_rows, (first_rows, seqs)
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    expect(task_page.locator("#status")).to_contain_text("Echoed: hello from the browser")
    expect(task_page.locator("#artifacts")).to_contain_text("hello from the browser")
    screenshot(task_page, "08-task-completed")

    # the Try-it console saw the whole stream
    events = page.locator("#tryit-log li.event")
    expect(events.last).to_have_attribute("data-state", "TASK_STATE_COMPLETED")
    expect(page.locator('#tryit-log li.event[data-kind="artifact-update"]')).to_have_count(1)
    screenshot(page, "06-agent-tryit")
    task_page.close()

    # more history, for the lists and charts: a task pushing to two webhooks
    hooks = make_agent(tenant, "hooks", config={"input_required": True})
    push_task = push_deliveries(live_platform, hooks, make_key(tenant, "hooks"), receivers)

    # and a conformance agent with mixed outcomes, so the lists and charts show more than one
    tck = make_agent(tenant, "tck", kind="conformance", config={"step_seconds": 0.05})
    tck_target = Target(live_platform.agent_url(tck), make_key(tenant, "tck"), tck)
    with httpx.Client(timeout=60) as http:
        for prefix in ("done", "tck-reject-task", "tck-input-required", "done", "done"):
            ask = message("scenario", messageId=mid(prefix))
            result_of(rpc(http, tck_target, "SendMessage", {"message": ask}))

    # the task list has both tasks
    page.goto(f"{base}/console/tasks/")
    row = page.locator(f'#task-list tr[data-task-id="{task_id}"]')
    expect(row).to_contain_text("TASK_STATE_COMPLETED")
    expect(page.locator(f'#task-list tr[data-task-id="{push_task}"]')).to_be_visible()
    screenshot(page, "09-task-list")

    # push deliveries: the delivered ones and the dead ones
    page.goto(f"{base}/console/deliveries/")
    deliveries = page.locator("#deliveries tr.delivery")
    expect(deliveries.first).to_be_visible()
    expect(page.locator('#deliveries tr.delivery[data-state="delivered"]').first).to_be_visible()
    expect(page.locator('#deliveries tr.delivery[data-state="dead"]').first).to_be_visible()
    screenshot(page, "10-deliveries")

    # charts: one section per agent that ran tasks, each with its SVG charts
    page.goto(f"{base}/console/charts/")
    for slug in ("watcher", "hooks"):
        section = page.locator(f'section.agent-charts[data-agent="{tenant.slug}/{slug}"]')
        expect(section.locator("svg").first).to_be_visible()
    screenshot(page, "11-charts")

    # workers: the live worker answered, the queues are shown, and a job that failed on it
    job_id = str(uuid.uuid4())
    celery_app.send_task("push_app.tasks.push_deliver_task", args=["not-a-uuid"], task_id=job_id)
    wait_until(
        lambda: JobFailure.objects.filter(celery_task_id=job_id).exists(),
        what="the worker to record the failed job",
    )
    page.goto(f"{base}/console/workers/")
    expect(page.locator("#workers .worker").first).to_be_visible()
    expect(page.locator(f'tr.failure[data-job="{job_id}"]')).to_contain_text("ValueError")
    expect(page.locator("#queues")).to_be_visible()
    screenshot(page, "12-workers")

    # the overview now lists both agents; the secret is not shown again
    page.goto(f"{base}/console/")
    expect(page.locator(f'a[href="/console/t/{tenant.slug}/a/watcher/"]')).to_be_visible()
    screenshot(page, "13-overview-populated")
    page.goto(agent_url)
    expect(page.locator("#new-secret")).to_have_count(0)
    assert js_errors == []


# --- isolation -------------------------------------------------------------------------------


def test_a_member_of_another_tenant_gets_the_404_page(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
    make_agent: Any,
    make_key: Any,
) -> None:
    # given: tenant A's agent with a task, and a member of tenant B
    base = live_platform.url
    a, b = make_tenant(), make_tenant()
    secret_agent = make_agent(a, "secret-agent")
    with httpx.Client(timeout=60) as http:
        target = Target(live_platform.agent_url(secret_agent), make_key(a), secret_agent)
        task = rpc_send(http, target, "for A only")["task"]
    make_agent(b, "own")
    member = django_user_model.objects.create_user("member-b", password=PASSWORD)
    Membership.objects.create(user=member, tenant=b, role="member")

    # when: the member logs in
    log_in(page, base, "member-b")

    # then: B only, and nothing to register (members only look)
    expect(page.locator(f'a[href="/console/t/{b.slug}/a/own/"]')).to_be_visible()
    expect(page.locator("main")).not_to_contain_text(a.slug)
    expect(page.locator(f'a[href="/console/t/{b.slug}/agents/new/"]')).to_have_count(0)

    # A's pages are the 404 page, exactly like pages that do not exist
    urls = [
        f"/console/t/{a.slug}/a/{secret_agent.slug}/",
        f"/console/t/{a.slug}/tasks/{task['id']}/",
        f"/console/t/{a.slug}/agents/new/",
        f"/console/t/{b.slug}/tasks/{uuid.uuid4()}/",
    ]
    for url in urls:
        response = page.goto(base + url)
        assert response is not None and response.status == 404, url
        expect(page.locator("main h1")).to_have_text("Not found")
        expect(page.locator("main")).not_to_contain_text("secret-agent")
        if url == urls[0]:
            screenshot(page, "14-isolation-404")

    # and A's task is not in the member's task list
    page.goto(f"{base}/console/tasks/")
    expect(page.locator("#task-list")).to_be_visible()
    expect(page.locator(f'#task-list tr[data-task-id="{task["id"]}"]')).to_have_count(0)

    # B's own agent page works (the 404s above are not a broken console)
    response = page.goto(f"{base}/console/t/{b.slug}/a/own/")
    assert response is not None and response.status == 200
    expect(page.locator("#card-json")).to_contain_text('"name"')
    assert js_errors == []
