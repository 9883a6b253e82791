"""Fixtures for the real-browser tests: Debian's Chromium ($A2A_CHROMIUM_BIN, by default
/usr/bin/chromium, installed by `make test` when it can) driven by Playwright's sync API, against
the live platform.

Chromium never comes from a downloader (`playwright install`): the PyPI package is used for its
driver only. Without the browser or the package these tests skip and say what is missing on a
developer's machine; in CI (CI=true) they fail (tests/conftest.py `require`).

Playwright's sync API keeps an asyncio loop running on this thread (its dispatcher greenlet)
for as long as it is started, so Django sees every ORM call of the test body as made "from an
async context". The browser therefore lives for this package only (not the session, where its
loop would break the tests that run after), and DJANGO_ALLOW_ASYNC_UNSAFE is set while it runs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import require

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

ROOT = Path(__file__).resolve().parents[2]
# scripts/services.sh exports the path it checked (and installed when it could).
CHROMIUM = Path(os.environ.get("A2A_CHROMIUM_BIN", "").strip() or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # The machine's network is closed: without these Chromium keeps trying (and failing) to
    # reach Google's services, which slows and clutters every page load.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # Containers often have a tiny /dev/shm, where Chromium's renderers crash on big pages.
    "--disable-dev-shm-usage",
]
VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 15_000


def screenshot_dir() -> Path:
    """Where screenshots go: $A2A_SCREENSHOT_DIR, else test-artifacts/screenshots/."""
    configured = os.environ.get("A2A_SCREENSHOT_DIR", "").strip()
    return Path(configured) if configured else ROOT / "test-artifacts" / "screenshots"


def _why_no_browser() -> str | None:
    if not CHROMIUM.exists():
        return (
            f"browser tests need Debian's Chromium at {CHROMIUM}, which is missing: run "
            "`make test` as root (it installs it) or `apt-get install --no-install-recommends "
            "chromium` (never `playwright install`), or set A2A_CHROMIUM_BIN to its path"
        )
    if not os.access(CHROMIUM, os.X_OK):
        return f"browser tests need {CHROMIUM} to be executable; it is not (check its mode)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return (
            "browser tests need the Python package playwright (its driver only): "
            "`.venv/bin/pip install 'playwright>=1.45,<2'` or `make setup`"
        )
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: without a browser there is no point starting the live platform.
    reason = _why_no_browser()
    require(not reason, reason or "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    # Kept on the test item, so the `context` fixture knows at teardown whether the test failed.
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


@pytest.fixture(scope="package")
def browser(request: pytest.FixtureRequest) -> Iterator[Browser]:
    """Headless Chromium for the tests of this package; without it they skip (fail in CI)."""
    reason = _why_no_browser()
    require(not reason, reason or "")
    # The live platform copies this process's environment when it starts: start it before the
    # variable below is set, so daphne and the worker keep Django's async-safety checks.
    request.getfixturevalue("live_platform")
    from playwright.sync_api import expect, sync_playwright

    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        expect.set_options(timeout=TIMEOUT_MS)
        yield launched
        launched.close()
    finally:
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def context(browser: Browser, request: pytest.FixtureRequest) -> Iterator[BrowserContext]:
    """A fresh browser profile per test (no cookies, no storage); on failure every open page
    is saved as FAILED-<test>-<n>.png beside the other screenshots."""
    ctx = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    ctx.set_default_timeout(TIMEOUT_MS)
    yield ctx
    report = getattr(request.node, "_report_call", None)
    if report is not None and report.failed:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)
        for n, open_page in enumerate(ctx.pages):
            _save(open_page, f"FAILED-{name}-{n}")
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture
def js_errors(context: BrowserContext) -> list[str]:
    """Uncaught script errors of any page of the test's context, as they happen."""
    errors: list[str] = []
    context.on("weberror", lambda e: errors.append(f"{e.page and e.page.url}: {e.error}"))
    return errors


def _save(page: Page, name: str) -> Path:
    path = screenshot_dir() / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture
def screenshot() -> Callable[[Page, str], Path]:
    """`screenshot(page, name)`: the whole page as <screenshot dir>/<name>.png."""
    return _save
