"""The audit log in a real browser against the live platform: an owner registers an agent,
creates a key and revokes it, then finds all three on the Audit log page (who, from where, what
changed, the key's secret nowhere), filters them, and exports them; a member of the tenant reads
the same log without the addresses and with no export; the page fits a phone's width."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import pytest

from agents.models import ApiKey, Membership

from .test_console import PASSWORD, Shot, expect, log_in
from .test_layout import Layout

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_an_owners_changes_are_on_the_audit_log_page(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
) -> None:
    # given an owner and a member of a tenant
    base = live_platform.url
    tenant = make_tenant()
    for name, role in (("audit-owner", "owner"), ("audit-member", "member")):
        person = django_user_model.objects.create_user(name, password=PASSWORD)
        Membership.objects.create(user=person, tenant=tenant, role=role)

    # when the owner registers an agent, creates a key and revokes it
    log_in(page, base, "audit-owner")
    page.goto(f"{base}/console/t/{tenant.slug}/agents/new/")
    page.fill("#id_slug", "audited")
    page.fill("#id_name", "Audited")
    page.fill("#id_description", "An agent whose changes are on record.")
    page.select_option("#id_executor_kind", "echo")
    page.click("form:has(#id_slug) [type=submit]")
    expect(page).to_have_url(f"{base}/console/t/{tenant.slug}/a/audited/")
    page.fill("#key-form #id_name", "audited-key")
    page.click("#key-form [type=submit]")
    secret = page.locator("#new-secret").inner_text()
    key = ApiKey.objects.get(tenant=tenant, name="audited-key")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f'#keys tr[data-prefix="{key.prefix}"] button')
    expect(page.locator(f'#keys tr[data-prefix="{key.prefix}"]')).to_have_count(0)

    # then the Audit log page lists them, newest first, as the owner, from the browser's address
    page.click('header.top nav a:text("Audit log")')
    expect(page).to_have_url(f"{base}/console/audit/")
    events = page.locator("#audit tr.event")
    expect(events.first).to_have_attribute("data-action", "revoke")
    mine = page.locator('#audit tr.event:has(td:text("user:audit-owner"))')
    expect(mine).to_have_count(3)
    assert [mine.nth(i).get_attribute("data-action") for i in range(3)] == [
        "revoke",
        "create",
        "create",
    ]
    expect(mine.first.locator('td[data-label="From"]')).to_have_text("127.0.0.1")
    expect(mine.nth(1).locator('li[data-field="secret_hash"] .after')).to_have_text("••••")
    content = page.content()
    assert secret not in content and key.secret_hash not in content
    screenshot(page, "audit")

    # the filters narrow it
    page.select_option("#id_action", "revoke")
    page.click("#audit-filters [type=submit]")
    expect(page.locator("#audit tr.event")).to_have_count(1)
    expect(page.locator("#audit tr.event").first).to_contain_text("audited-key")

    # and the export holds what the filters select, without the secret
    export = page.request.get(base + (page.locator("#export-csv").get_attribute("href") or ""))
    assert export.ok and export.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(export.text())))
    assert [(r["action"], r["actor"], r["source"]) for r in rows] == [
        ("revoke", "user:audit-owner", "127.0.0.1")
    ]
    assert secret not in export.text()

    # the page fits a desktop and a phone
    layout = Layout(page, screenshot)
    layout.check("audit", f"{base}/console/audit/", "#audit tr.event")
    assert layout.problems == [], "\n".join(layout.problems)

    # a member reads the same log, without the addresses, and exports nothing
    page.context.clear_cookies()
    log_in(page, base, "audit-member")
    page.goto(f"{base}/console/audit/")
    expect(page.locator('#audit tr.event:has(td:text("user:audit-owner"))')).to_have_count(3)
    assert "127.0.0.1" not in page.locator("#audit").inner_text()
    expect(page.locator("#export-csv")).to_have_count(0)
    assert js_errors == []
