"""ASGI entry point: daphne serves HTTP (and SSE) through Channels; a2a_platform.webserver is
the daphne the web processes run (its drain on SIGTERM, its answers to what HTTP refuses).

Static files (the admin's, Swagger UI's from drf-spectacular-sidecar) are served by Django's
ASGI static files handler straight from the installed apps, so the platform needs no CDN, no
`collectstatic` and no separate file server; a deployment may still put one in front.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")

django_asgi_app = get_asgi_application()

import asyncio  # noqa: E402
import contextlib  # noqa: E402
from collections.abc import Awaitable, Callable  # noqa: E402
from typing import Any  # noqa: E402

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.exceptions import RequestAborted, SuspiciousOperation  # noqa: E402
from django.core.handlers.asgi import ASGIHandler, get_script_prefix  # noqa: E402
from django.core.handlers.exception import convert_exception_to_response  # noqa: E402
from django.http import HttpRequest, HttpResponseBase, HttpResponseNotFound  # noqa: E402
from django.urls import get_resolver, set_script_prefix  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from a2a_platform import heap  # noqa: E402
from a2a_platform.db import db  # noqa: E402
from a2a_platform.urls import ORIGIN_A2A_PATH  # noqa: E402
from agents.hosts import LOOKUP, host_agent, host_agent_nowait  # noqa: E402
from agents.views import AGENT_HOST_SCOPE_KEY  # noqa: E402

# The middleware of the A2A protocol paths: of settings.MIDDLEWARE, those whose hooks only read
# the request and set headers or redirect (no session, user, CSRF token or messages: the A2A
# views authenticate API keys themselves and are CSRF-exempt).
A2A_PATH_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

View = Callable[[HttpRequest], Awaitable[HttpResponseBase]]


def _in_the_event_loop(middleware: Any, get_response: View) -> View:
    """What MiddlewareMixin.__acall__ does, without its two thread hops: the hooks of
    A2A_PATH_MIDDLEWARE do no I/O."""

    async def layer(request: HttpRequest) -> HttpResponseBase:
        response = None
        if hasattr(middleware, "process_request"):
            response = middleware.process_request(request)
        response = response or await get_response(request)
        if hasattr(middleware, "process_response"):
            response = middleware.process_response(request, response)
        return response

    return layer


class A2AProtocolHandler(ASGIHandler):
    """Django's handler for the A2A endpoints under /a2a/<tenant>/<agent>/ (not the cards),
    without a thread per request.

    Django runs each request in its own asgiref ThreadSensitiveContext and each hook of its
    middleware through a thread-sensitive `sync_to_async`: for an async view that is a thread
    started per request, a dozen hops to it, and a join of that thread on the event loop when
    the request ends. The A2A views are async and do their database work on the process's
    database threads (a2a_platform.db), so here only A2A_PATH_MIDDLEWARE runs, in the event
    loop, and the request goes to the view without the signals' thread hops (`handle`).
    """

    def load_middleware(self, is_async: bool = False) -> None:
        self._view_middleware = []
        self._template_response_middleware = []
        self._exception_middleware = []
        handler: View = convert_exception_to_response(self._get_response_async)
        for path in reversed(A2A_PATH_MIDDLEWARE):
            middleware = import_string(path)(handler)
            handler = convert_exception_to_response(_in_the_event_loop(middleware, handler))
        self._middleware_chain = handler

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """ASGIHandler.handle without its two hops to asgiref's sync thread per request: the
        `request_started` signal and `response.close()` (which sends `request_finished`) run
        there because their receivers tidy up database connections. No database connection
        lives on the event loop's thread (a2a_platform.db gives each call on the database
        threads its own tidy-up), so `request_started` is not sent, and the response is closed
        here, in the loop, where `request_finished`'s receivers (Django's own, all sync) find
        nothing to close. A receiver that needs I/O must not be connected to it."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            error_response.close()
            return

        async def process_request() -> HttpResponseBase:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away
                await self.send_response(response, send)
            return response

        # As Django does: a disconnect while the view runs (a stream's client going away)
        # cancels the view.
        disconnect = asyncio.create_task(self.listen_for_disconnect(receive))
        serve = asyncio.create_task(process_request())
        try:
            await asyncio.wait((disconnect, serve), return_when=asyncio.FIRST_COMPLETED)
            for task in (disconnect, serve):
                if not task.done():
                    task.cancel()
                with contextlib.suppress(asyncio.CancelledError, RequestAborted):
                    await task
            if not serve.cancelled():
                serve.result().close()
        finally:
            body_file.close()
            # An exception caught from a task above has a traceback through this frame, which
            # holds the task, which holds the exception: a reference cycle that would keep the
            # whole request (about 100 objects) alive until the garbage collector's next pass.
            disconnect = serve = task = None  # type: ignore[assignment]


class A2APaths:
    """The A2A protocol paths to their own handler, everything else to Django's."""

    def __init__(self, django_app: Any, a2a_app: Any) -> None:
        self.django_app, self.a2a_app = django_app, a2a_app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if path.startswith("/a2a/") and "/.well-known/" not in path:
            await self.a2a_app(scope, receive, send)
        else:
            await self.django_app(scope, receive, send)


class AgentHosts:
    """Requests to an agent's own host name (agents.hosts: the operator's pattern, or a custom
    domain) are that agent's: `/<path>` there is `/a2a/<tenant>/<agent>/<path>` (the tenant's
    JWKS at `/.well-known/jwks.json`), and the host is kept in the scope for the card's URLs.

    The platform's own origin is the default agent's server (A2A_DEFAULT_AGENT) in the same
    way for the A2A paths (a2a_platform.urls.ORIGIN_A2A_PATH, and JSON-RPC POSTed to `/`), as
    its well-known card already is; its other paths (the console, admin, health, metrics, the
    API schema, the JWKS, callbacks) stay the platform's. Without a default agent those A2A
    paths are answered by a2a_platform.urls in their binding's format."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            host = _host_header(scope)
            found = host_agent_nowait(host) if host else None
            if found == LOOKUP:
                found = await db(host_agent)(host)
            if found:
                tenant, agent = found
                jwks = scope["path"] == "/.well-known/jwks.json"
                scope = _under(scope, f"/a2a/{tenant}" if jwks else f"/a2a/{tenant}/{agent}")
                scope[AGENT_HOST_SCOPE_KEY] = host
            elif settings.A2A_DEFAULT_AGENT and _origin_a2a_call(scope):
                scope = _under(scope, f"/a2a/{settings.A2A_DEFAULT_AGENT}")
        await self.app(scope, receive, send)


def _origin_a2a_call(scope: dict[str, Any]) -> bool:
    path = scope["path"]
    if path == "/":
        return scope["method"] == "POST"  # JSON-RPC; a GET of `/` is the console's
    return ORIGIN_A2A_PATH.fullmatch(path) is not None


def _under(scope: dict[str, Any], prefix: str) -> dict[str, Any]:
    """The scope with its path under `prefix`."""
    path = scope["path"]
    raw_path = prefix.encode() + (scope.get("raw_path") or path.encode())
    return {**scope, "path": prefix + path, "raw_path": raw_path}


def _host_header(scope: dict[str, Any]) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            return value.decode("latin-1")
    return ""


class StaticFiles(ASGIStaticFilesHandler):
    """Django's handler, answering a path that tries to leave the static folders (`..`) with
    404 instead of a 500, and with `nosniff` like the rest of the site."""

    async def get_response_async(self, request: Any) -> Any:
        try:
            response = await super().get_response_async(request)
        except SuspiciousOperation:
            response = HttpResponseNotFound("Not found.", content_type="text/plain")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response


application = ProtocolTypeRouter(
    {"http": AgentHosts(StaticFiles(A2APaths(django_asgi_app, A2AProtocolHandler())))}
)

# The URL patterns loaded and indexed now, so that they are among the objects frozen.
get_resolver().reverse_dict  # noqa: B018
heap.freeze("web")
