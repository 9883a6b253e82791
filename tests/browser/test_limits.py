"""Bounds as a person meets them in a real browser against the live platform: the registration
form says each field's limit (the browser keeps a typed value within it), and a form sent over
the console's limit anyway (a script filled it) gets the console's own page naming the limit,
413, logged as one line; "Test connection" says the same in its status line."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings

from agents import limits
from agents.models import Agent, Membership

from .test_console import PASSWORD, Shot, expect, log_in

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_a_form_over_the_consoles_limit_gets_the_page_naming_it(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
) -> None:
    # given an owner on the registration page
    base = live_platform.url
    tenant = make_tenant()
    owner = django_user_model.objects.create_user("limits-owner", password=PASSWORD)
    Membership.objects.create(user=owner, tenant=tenant, role="owner")
    log_in(page, base, "limits-owner")
    daphne_log = live_platform.log_dir / "daphne.log"
    logged_before = len(daphne_log.read_text())
    new_agent_url = f"{base}/console/t/{tenant.slug}/agents/new/"
    page.goto(new_agent_url)

    # typing, the browser keeps the name within its bound
    page.fill("#id_slug", "huge")
    page.locator("#id_name").press_sequentially("n" * (limits.AGENT_NAME + 5), delay=0)
    expect(page.locator("#id_name")).to_have_value("n" * limits.AGENT_NAME)
    page.select_option("#id_executor_kind", "openai")

    # "Test connection" with a system prompt a script made larger than the console takes
    limit = settings.A2A_CONSOLE_MAX_REQUEST_BYTES
    page.eval_on_selector(
        "#id_cfg__openai__system_prompt", "(el, n) => { el.value = 'p'.repeat(n); }", limit
    )
    page.click("#kind-openai [data-test-connection]")
    status = page.locator("#test-status-openai")
    expect(status).to_contain_text("A2A_CONSOLE_MAX_REQUEST_BYTES")
    expect(status).to_contain_text(f"at most {limit:,} bytes")

    # when the form is sent with a description a script made larger still
    page.eval_on_selector("#id_description", "(el, n) => { el.value = 'd'.repeat(n); }", limit + 1)
    with page.expect_response(new_agent_url) as answered:
        page.click("form:has(#id_slug) [type=submit]")

    # then the console's own page says which limit, with 413, and nothing is saved
    assert answered.value.status == 413
    expect(page).to_have_title("Too large to send · A2A platform")
    expect(page.locator("header.top .brand")).to_be_visible()
    reason = page.locator("#refusal-reason")
    expect(reason).to_contain_text(f"at most {limit:,} bytes (4 MiB) in one request")
    expect(reason).to_contain_text("A2A_CONSOLE_MAX_REQUEST_BYTES")
    expect(reason).to_contain_text("Nothing was saved")
    screenshot(page, "limits-413")
    assert not Agent.objects.filter(tenant=tenant, slug="huge").exists()
    # one line in the web process's log for each refusal, no traceback
    log = daphne_log.read_text()[logged_before:]
    refusals = [line for line in log.splitlines() if "refused (ConsoleBodyTooBig)" in line]
    assert any(f"POST /console/t/{tenant.slug}/agents/new/" in r for r in refusals), refusals
    assert any("/agents/test-connection/" in r for r in refusals), refusals
    assert "Traceback" not in log
    assert not js_errors

    # and back on the form, it is sent within the limits
    page.goto(new_agent_url)
    page.fill("#id_slug", "huge")
    page.fill("#id_name", "Huge")
    page.fill("#id_description", "d" * limits.AGENT_DESCRIPTION)
    page.select_option("#id_executor_kind", "echo")
    page.click("form:has(#id_slug) [type=submit]")
    expect(page).to_have_url(f"{base}/console/t/{tenant.slug}/a/huge/")
    assert len(Agent.objects.get(tenant=tenant, slug="huge").description) == 4000
