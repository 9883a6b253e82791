"""The console's layout with long unbroken text, in a real browser against the live platform: an
agent with a 200-character name and a 3,000-character description without a space, registered
through the console's form; a task on it with 200 KB of text without a space (sent over A2A
with an API key), and 200 KB more sent from Try it; a push delivery to a 2,000-character URL
answered with a long error, a failed job with a long argument, a person and an operator with
long names, a key with limits of its own, a token issuer with a long name, URL, audience, user
claim, scope and token endpoint; then every console page that shows them, at 1280 px and at
390 px.

On each page: the document is no wider than the window (with every <details> open, so what a
click reveals counts too); at phone width every table fits the screen and the cells of its
state column are on screen (not clipped, not covered), and the event timeline's rows stay a
few lines tall. Every page is saved as a screenshot at both widths."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from a2a_platform.celery import app as celery_app
from agents import limits
from agents.models import Agent, Issuer, Membership
from agents.services import api_key_create, issuer_create, tenant_create
from console.models import JobFailure
from push_app.models import Delivery

from ..e2e.helpers import Target, message, result_of, rpc, wait_until
from ..e2e.webhook import Receiver
from .test_console import PASSWORD, Shot, expect, log_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
# A timeline row at phone width holds its seq, kind, state and time (a line or two), a summary
# of at most 140 characters (four lines) and the JSON toggle: about 190 px. A dozen lines is
# the limit; a squeezed column makes rows many times taller, mostly blank.
TIMELINE_ROW_MAX_PX = 240


def unbroken(word: str, length: int) -> str:
    """`length` characters of `word` repeated: no space, no hyphen, nowhere to break."""
    return (word * (length // len(word) + 1))[:length]


TENANT_SLUG = f"t{uuid.uuid4().hex[:8]}" + unbroken("longtenant", 54)  # 63, the most a slug has
TENANT_NAME = unbroken("Tenantnamewithoutaspace", 200)
AGENT_SLUG = unbroken("longagentslug", 63)
AGENT_NAME = unbroken("Agentnamewithoutaspace", 200)
DESCRIPTION = unbroken("Descriptionwithoutaspace", 3000)
KEY_NAME = unbroken("Keynamewithoutaspace", 200)
PRINCIPAL = unbroken("principalwithoutaspace", 200)
CONTEXT_ID = unbroken("contextwithoutaspace", 200)
MESSAGE = unbroken("Messagewithoutaspace", 200_000)
OPERATOR = unbroken("operatorwithoutaspace", 150)  # the most a user name has
USERNAME = unbroken("personwithoutaspace", 150)
EMAIL = unbroken("mailwithoutaspace", 200) + "@example.org"
HOOK_ERROR = unbroken("Receivererrorwithoutaspace", 500)
ISSUER_NAME = unbroken("Issuernamewithoutaspace", 200)
ISSUER_URL = "https://login.example.com/" + unbroken("realmwithoutaspace", 474)  # 500 in all
AUDIENCE = unbroken("audiencewithoutaspace", limits.ISSUER_AUDIENCE)
SCOPE = unbroken("scopewithoutaspace", limits.ISSUER_SCOPE)
TOKEN_ENDPOINT = "https://login.example.com/" + unbroken("tokenendpointwithoutaspace", 1974)


# --- what is measured on each page --------------------------------------------------------------

# How far the document sticks out sideways, and the outermost elements that stick out.
_OVERFLOW = r"""() => {
  const width = window.innerWidth;
  const over = document.documentElement.scrollWidth - width;
  const culprits = [];
  if (over > 0) {
    for (const el of document.body.querySelectorAll("*")) {
      const right = el.getBoundingClientRect().right;
      const parent = el.parentElement.getBoundingClientRect().right;
      if (right > width + 0.5 && parent <= width + 0.5) {
        const classes = typeof el.className === "string" ? el.className.trim() : "";
        culprits.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
          (classes ? "." + classes.split(/\s+/).join(".") : "") + " right=" + Math.round(right));
      }
      if (culprits.length >= 5) break;
    }
  }
  return {over, culprits};
}"""

# At phone width: each visible table inside the screen, and the cells of its state column (by
# its header: State, By state or Outcome) on screen: scrolled to, the cell's middle is the cell
# itself (not clipped, not covered).
_TABLES = r"""() => {
  const width = window.innerWidth;
  const problems = [];
  let stateCells = 0;
  for (const table of document.querySelectorAll("main table")) {
    if (!table.getClientRects().length) continue;
    const name = table.id ? "#" + table.id : "table." + (table.className || "(plain)");
    const box = table.getBoundingClientRect();
    if (box.left < -0.5 || box.right > width + 0.5) {
      problems.push(`${name} spans ${Math.round(box.left)}..${Math.round(box.right)} px`);
    }
    const heads = Array.from(table.querySelectorAll("thead th"));
    const column = heads.findIndex((th) => /^(by )?state$|^outcome$/i.test(th.textContent.trim()));
    if (column < 0) continue;
    const rows = Array.from(table.querySelectorAll("tbody tr")).slice(0, 8);
    for (const row of rows) {
      const cell = row.children[column];
      if (row.children.length !== heads.length || !cell.textContent.trim()) continue;
      const r = cell.getBoundingClientRect();
      window.scrollTo(0, window.scrollY + r.top - window.innerHeight / 2);
      const now = cell.getBoundingClientRect();
      const hit = document.elementFromPoint(now.left + now.width / 2, now.top + now.height / 2);
      if (now.width < 1 || now.left < -0.5 || now.right > width + 0.5 || !cell.contains(hit)) {
        problems.push(`${name}: a state cell is not on screen (${Math.round(now.left)}..` +
          `${Math.round(now.right)} px, covered by ${hit && hit.tagName})`);
      }
      stateCells += 1;
    }
  }
  window.scrollTo(0, 0);
  return {problems, stateCells};
}"""

_OPEN_DETAILS = "() => document.querySelectorAll('main details').forEach((d) => { d.open = true; })"


class Layout:
    """Visits pages at both widths, collecting every problem (so one run names them all)."""

    def __init__(self, page: Page, screenshot: Shot) -> None:
        self.page = page
        self.screenshot = screenshot
        self.problems: list[str] = []
        self.shots: list[Path] = []

    def check(
        self, name: str, url: str, ready: str, *, fill: Any = None, states: bool = False
    ) -> None:
        """`states`: the page lists rows with a state, whose cells must have been looked at."""
        for label, viewport in (("1280", DESKTOP), ("390", PHONE)):
            self.page.set_viewport_size(viewport)  # type: ignore[arg-type]
            self.page.goto(url)
            expect(self.page.locator(ready).first).to_be_attached()
            if fill is not None:
                fill(self.page)
            where = f"{name} at {label} px"
            if viewport is PHONE:
                self._timeline_rows(where)
            self.page.evaluate(_OPEN_DETAILS)
            overflow = self.page.evaluate(_OVERFLOW)
            if overflow["over"] > 0:
                self.problems.append(
                    f"{where}: the page is {overflow['over']} px wider than the window "
                    f"({', '.join(overflow['culprits'])})"
                )
            if viewport is PHONE:
                tables = self.page.evaluate(_TABLES)
                self.problems.extend(f"{where}: {p}" for p in tables["problems"])
                if states and not tables["stateCells"]:
                    self.problems.append(f"{where}: no state column found to look at")
            self.shots.append(
                self.screenshot(self.page, f"{70 + len(self.shots) // 2}-layout-{name}-{label}")
            )

    def _timeline_rows(self, where: str) -> None:
        heights = self.page.locator("#timeline tr.event").evaluate_all(
            "rows => rows.map(r => r.getBoundingClientRect().height)"
        )
        tall = [round(h) for h in heights if h > TIMELINE_ROW_MAX_PX]
        if tall:
            self.problems.append(f"{where}: timeline rows {tall} px tall")


# --- the test -----------------------------------------------------------------------------------


def test_long_unbroken_text_fits_every_page_at_desktop_and_phone_width(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    tmp_path: Path,
) -> None:
    # given: long unbroken names everywhere; the agent registered through the console's form
    base = live_platform.url
    tenant = tenant_create(slug=TENANT_SLUG, name=TENANT_NAME)
    django_user_model.objects.create_user(OPERATOR, password=PASSWORD, is_staff=True, email=EMAIL)
    person = django_user_model.objects.create_user(USERNAME, password=PASSWORD, email=EMAIL)
    Membership.objects.create(user=person, tenant=tenant, role="member")
    log_in(page, base, OPERATOR)
    page.goto(f"{base}/console/t/{tenant.slug}/agents/new/")
    page.fill("#id_slug", AGENT_SLUG)
    page.fill("#id_name", AGENT_NAME)
    page.fill("#id_description", DESCRIPTION)
    page.select_option("#id_executor_kind", "echo")
    page.click("form:has(#id_slug) [type=submit]")
    agent_url = f"{base}/console/t/{tenant.slug}/a/{AGENT_SLUG}/"
    expect(page).to_have_url(agent_url)
    agent = Agent.objects.get(tenant=tenant, slug=AGENT_SLUG)
    assert (agent.name, agent.description) == (AGENT_NAME, DESCRIPTION)
    api_key, key = api_key_create(tenant=tenant, name=KEY_NAME, principal=PRINCIPAL)
    api_key.limits = {"key_requests_per_second": 1_000_000}  # a row of the limits page
    api_key.save()
    issuer = issuer_create(
        tenant=tenant,
        issuer=ISSUER_URL,
        audiences=[AUDIENCE, live_platform.agent_url(agent)],
        name=ISSUER_NAME,
        user_claim=unbroken("claimwithoutaspace", 100),
        scopes={"send": [SCOPE, "a2a.send"], "push": [SCOPE]},
    )
    Issuer.objects.filter(pk=issuer.pk).update(
        discovered={"token_endpoint": TOKEN_ENDPOINT, "read_at": "2026-12-08T10:00:00+00:00"}
    )

    # a task with 200 KB of text without a space, sent over A2A with the key; its push config
    # points at a 2,000-character URL whose receiver refuses for good with a long error
    receiver = Receiver(
        directory=tmp_path / "webhooks",
        default={"status": 410, "headers": {}, "body": HOOK_ERROR},
    ).start()
    try:
        hook_url = f"{receiver.url}/{unbroken('hookpathwithoutaspace', 2000)}"
        target = Target(live_platform.agent_url(agent), key, agent)
        params = {
            "message": message(MESSAGE, contextId=CONTEXT_ID),
            "configuration": {"taskPushNotificationConfig": {"id": "hook", "url": hook_url}},
        }
        with httpx.Client(timeout=60) as http:
            task = result_of(rpc(http, target, "SendMessage", params))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
        dead = wait_until(
            lambda: Delivery.objects.filter(config__task_id=task["id"], state="dead").first(),
            what="the refused delivery to be dead-lettered",
        )
    finally:
        receiver.stop()
    assert HOOK_ERROR[:100] in dead.last_error

    # a job that fails on the live worker with a long argument
    job_id = str(uuid.uuid4())
    celery_app.send_task(
        "push_app.tasks.push_deliver_task", args=[unbroken("notanid", 3000)], task_id=job_id
    )
    wait_until(
        lambda: JobFailure.objects.filter(celery_task_id=job_id).exists(),
        what="the worker to record the failed job",
    )

    # when: the operator visits every page that shows them, at both widths
    task_url = f"{base}/console/t/{tenant.slug}/tasks/{task['id']}/"
    layout = Layout(page, screenshot)
    layout.check(
        "overview",
        f"{base}/console/",
        f'a[href="/console/t/{tenant.slug}/a/{agent.slug}/"]',
        states=True,
    )

    def try_it(p: Page) -> None:
        """200 KB without a space sent from Try it: the echo comes back in the streamed log."""
        p.fill("#tryit-text", MESSAGE)
        p.click("#tryit-send")
        expect(p.locator("#tryit-log li.event").last).to_have_attribute(
            "data-state", "TASK_STATE_COMPLETED"
        )
        expect(p.locator('#tryit-log li.event[data-kind="artifact-update"]')).to_have_count(1)

    layout.check("agent", agent_url, "#card-json", fill=try_it)
    layout.check("agent-edit", agent_url + "edit/", "#id_description")
    layout.check(
        "tasks",
        f"{base}/console/tasks/",
        f'#task-list tr[data-task-id="{task["id"]}"]',
        states=True,
    )
    layout.check(
        "tasks-bad-filter",
        f"{base}/console/tasks/?state={unbroken('nostate', 300)}",
        "#filter-errors",
    )
    layout.check("task", task_url, "#timeline tr.event", states=True)
    layout.check(
        "deliveries", f"{base}/console/deliveries/", "#deliveries tr.delivery", states=True
    )
    layout.check(
        "deliveries-bad-filter",
        f"{base}/console/deliveries/?state={unbroken('nostate', 300)}",
        "#filter-errors",
    )
    layout.check(
        "delivery", f"{base}/console/deliveries/{dead.pk}/", "#attempts tr.attempt", states=True
    )
    layout.check("charts", f"{base}/console/charts/", "section.agent-charts svg")
    layout.check("workers", f"{base}/console/workers/", f'tr.failure[data-job="{job_id}"]')
    layout.check("people", f"{base}/console/t/{tenant.slug}/people/", "#people tr.person")
    layout.check("limits", f"{base}/console/t/{tenant.slug}/limits/", "#key-limits tr.holder")
    layout.check("usage", f"{base}/console/t/{tenant.slug}/usage/", "#usage-by-agent tr.total")
    issuers_url = f"{base}/console/t/{tenant.slug}/issuers/"
    layout.check("issuers", issuers_url, f"#issuer-{issuer.pk} .issuer-discovered")
    layout.check("issuer-edit", f"{issuers_url}{issuer.pk}/edit/", "#id_audiences")
    layout.check("audit", f"{base}/console/audit/?tenant={tenant.slug}", "#audit tr.event")

    # and the login page, logged out, after a failed attempt with a long user name
    page.context.clear_cookies()

    def failed_login(p: Page) -> None:
        p.fill("#id_username", USERNAME)
        p.fill("#id_password", "not-the-password")
        p.click("form:has(#id_password) [type=submit]")
        expect(p.locator("main .error")).to_be_visible()

    layout.check("login", f"{base}/console/login/", "#id_username", fill=failed_login)

    # then: nothing is wider than the window, and the state columns were looked at
    assert layout.problems == [], "\n".join(layout.problems)
    assert js_errors == []
