"""The Token issuers page in a real browser against the live platform, with a real local OpenID
provider (tests/e2e/oidc_provider.py) that daphne reads over real sockets.

The owner finds the page from the overview, adds the provider (a field error first), with the
agent's URL the page shows as the audience; "Check now" says what a token would meet and the
page shows what discovery found; a token the provider issues for that audience then calls the
agent. The owner edits the scopes, deactivates (asked to confirm; tokens are refused) and
deletes the issuer. A member sees the issuers without a control. The page fits a phone's width.
Each step is saved as a screenshot."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from agents.models import Issuer, Membership

from ..e2e.helpers import message, rpc_body, wait_until
from ..e2e.oidc_provider import Provider
from .test_console import PASSWORD, Shot, expect, log_in
from .test_console_actions import PHONE, _fits_the_width

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


def _send_with(url: str, token: str) -> httpx.Response:
    return httpx.post(
        url,
        json=rpc_body("SendMessage", {"message": message("hi from a token")}),
        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
        timeout=30,
    )


def test_an_owner_registers_checks_and_retires_a_token_issuer(
    live_platform: Any,
    page: Page,
    screenshot: Shot,
    js_errors: list[str],
    django_user_model: Any,
    make_tenant: Any,
    make_agent: Any,
    provider: Provider,
) -> None:
    # given an owner and a member of a tenant with an agent
    base = live_platform.url
    tenant = make_tenant()
    agent = make_agent(tenant, "helper")
    for name, role in (("issuers-owner", "owner"), ("issuers-member", "member")):
        person = django_user_model.objects.create_user(name, password=PASSWORD)
        Membership.objects.create(user=person, tenant=tenant, role=role)
    issuers_url = f"{base}/console/t/{tenant.slug}/issuers/"

    # the owner finds the page from the overview
    log_in(page, base, "issuers-owner")
    page.click(f'a[href="/console/t/{tenant.slug}/issuers/"]')
    expect(page).to_have_url(issuers_url)
    expect(page.locator("#no-issuers")).to_be_visible()
    audience = page.locator("#resource-url").inner_text()
    assert audience == live_platform.agent_url(agent)
    expect(page.locator("#metadata-url")).to_have_text(
        f"{base}/.well-known/oauth-protected-resource/a2a/{tenant.slug}/helper/"
    )
    screenshot(page, "35-issuers-empty")

    # adds the provider: no audience first, which the form says on its field
    page.click("#issuer-add")
    expect(page.locator("#id_algorithms input[value=RS256]")).to_be_checked()
    expect(page.locator("#id_algorithms input[value=ES256]")).to_be_checked()
    expect(page.locator("#id_user_claim")).to_have_value("sub")
    page.fill("#id_name", "Local provider")
    page.fill("#id_issuer", provider.issuer)
    page.fill("#id_scopes_send", "a2a.send")
    page.click("#issuer-save")
    expect(page.locator("#error-audiences")).to_contain_text("List at least one audience")
    screenshot(page, "36-issuer-form-error")
    assert not Issuer.objects.filter(tenant=tenant).exists()
    page.fill("#id_audiences", audience)
    page.click("#issuer-save")
    expect(page).to_have_url(issuers_url)
    expect(page.locator(".messages li.success")).to_contain_text("Issuer Local provider added")
    issuer = Issuer.objects.get(tenant=tenant)
    card = page.locator(f"#issuer-{issuer.pk}")
    expect(card.locator(".issuer-discovered")).to_contain_text("not read yet")

    # "Check now" says what a token would meet; the page shows what discovery found
    card.locator(".issuer-check").click()
    expect(page.locator(".messages li.success")).to_have_text(
        f"Issuer Local provider: 2 keys: RS256, ES256; token endpoint {provider.issuer}/token."
    )
    expect(card.locator(".issuer-discovered")).to_contain_text(f"{provider.issuer}/token")
    expect(card.locator(".issuer-jwks")).to_contain_text("(from discovery)")
    screenshot(page, "37-issuers-checked")

    # a token the provider issues for the agent's URL calls the agent (within the caches' time)
    token = provider.token("alice", audience=audience, scope="a2a.send")
    answered = wait_until(
        lambda: (r := _send_with(audience, token)).status_code == 200 and r,
        what="the new issuer's token to be taken",
    )
    assert answered.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # edits the scopes: a token without the new one is refused for sending
    card.locator(".issuer-edit").click()
    expect(page.locator("#id_scopes_send")).to_have_value("a2a.send")
    page.fill("#id_scopes_send", "a2a.send a2a.write")
    page.click("#issuer-save")
    expect(card.locator('.issuer-scopes [data-operation="send"]')).to_contain_text("a2a.write")
    wait_until(
        lambda: _send_with(audience, token).status_code == 403,
        what="the token without a2a.write to be refused",
    )

    # a member sees the issuer, and no control
    member = page.context.browser.new_context()  # type: ignore[union-attr]
    try:
        other = member.new_page()
        log_in(other, base, "issuers-member")
        other.goto(issuers_url)
        expect(other.locator(f"#issuer-{issuer.pk}")).to_contain_text(provider.issuer)
        expect(other.locator(".issuer-check, .issuer-edit, #issuer-add")).to_have_count(0)
        screenshot(other, "38-issuers-member")
    finally:
        member.close()

    # the page at phone width
    page.set_viewport_size(PHONE)
    page.reload()
    _fits_the_width(page)
    screenshot(page, "39-phone-issuers")
    page.set_viewport_size({"width": 1280, "height": 900})

    # deactivates it, asked first: its tokens are refused
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    card.locator(".issuer-toggle").click()
    expect(card).to_have_attribute("data-active", "false")
    assert questions and questions[0].startswith("Deactivate Local provider?"), questions
    write_token = provider.token("alice", audience=audience, scope="a2a.send a2a.write")
    wait_until(
        lambda: _send_with(audience, write_token).status_code == 401,
        what="the deactivated issuer's token to be refused",
    )

    # and deletes it, asked first
    page.once("dialog", lambda dialog: dialog.accept())
    card.locator(".issuer-delete").click()
    expect(page.locator(".messages li.success")).to_contain_text("Issuer Local provider deleted")
    expect(page.locator("#no-issuers")).to_be_visible()
    assert not Issuer.objects.filter(tenant=tenant).exists()
    assert js_errors == []
