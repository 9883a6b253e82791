"""The A2A protocol paths' own ASGI handler runs a chosen part of settings.MIDDLEWARE; a
middleware added to the settings must be placed on one side or the other, never skipped
silently. A request it served leaves nothing for the garbage collector."""

from __future__ import annotations

import asyncio
import collections
import gc
from typing import Any

import pytest
from django.conf import settings

from a2a_platform.asgi import A2A_PATH_MIDDLEWARE, application

# What the A2A views have no use for: they authenticate API keys themselves, are CSRF-exempt,
# neither read nor set a session, a user or messages, and bound their bodies themselves (the
# console's body limit is for its forms); an A2A call changes nothing the audit log records, so
# it needs no actor.
LEFT_OUT = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "audit.context.AuditContext",
    "console.refusals.ConsoleBodyLimit",
    "django.contrib.messages.middleware.MessageMiddleware",
]


def test_every_middleware_is_either_run_on_the_a2a_paths_or_known_to_be_left_out():
    run_there = [m for m in settings.MIDDLEWARE if m in A2A_PATH_MIDDLEWARE]
    assert run_there == A2A_PATH_MIDDLEWARE, "same middleware, same order"
    assert [m for m in settings.MIDDLEWARE if m not in A2A_PATH_MIDDLEWARE] == LEFT_OUT


async def _request(disconnect_after_response: bool) -> int:
    """One request through the ASGI application as daphne makes it: the body, then (when the
    response is done, as daphne does) `http.disconnect`, or nothing more (a kept-alive
    connection whose listener the handler cancels)."""
    messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    messages.put_nowait({"type": "http.request", "body": b"", "more_body": False})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            if disconnect_after_response:
                messages.put_nowait({"type": "http.disconnect"})

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",  # answered by the JSON-RPC view without the database: 405
        "scheme": "http",
        "path": "/a2a/some-tenant/some-agent/",
        "raw_path": b"/a2a/some-tenant/some-agent/",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    await application(scope, messages.get, send)
    return int(sent[0]["status"])


@pytest.mark.parametrize("disconnect_after_response", [True, False])
def test_a_request_on_the_a2a_paths_leaves_no_reference_cycle(disconnect_after_response):
    # A cycle through the exception handle() caught from its disconnect listener used to keep
    # every request's objects (request, response, tasks, frames: about 100) alive until the
    # next collection: about 7 % of daphne's CPU under load (docs/decisions.md).
    async def serve() -> collections.Counter[str]:
        assert await _request(disconnect_after_response) == 405  # one-time costs first
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage
        try:
            for _ in range(50):
                assert await _request(disconnect_after_response) == 405
            gc.collect()
            return collections.Counter(type(o).__qualname__ for o in gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()

    garbage = asyncio.run(serve())
    assert sum(garbage.values()) < 50, garbage.most_common(10)  # under one object a request
