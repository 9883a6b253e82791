"""Who is acting: the person of a console or admin request, a management command, or the
platform itself, carried in a context variable to wherever a change is recorded.

The middleware (`AuditContext`, on the console's and the admin's requests; the A2A paths do
not run it) sets the request, whose user and address are read only when a change is recorded.
Every management command sets `command:<name>` (Django's `BaseCommand.execute` is wrapped when
the app starts), but those that start serving processes: their changes are their requests' and
jobs' own. A change made with none of these set is the platform's own (`system`): a Celery job,
a signing key made on first use. Context variables follow `sync_to_async` and the database
threads (a2a_platform.db), so an async view's writes carry its request's actor too.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.management.base import BaseCommand
from django.http import HttpRequest, HttpResponseBase

ACTOR_MAX = 200
SOURCE_MAX = 100
# Commands that start processes serving requests or jobs: they act as no one.
SERVING_COMMANDS = frozenset({"runweb", "rungrpc", "celeryworker", "runserver", "testserver"})
# The source of a management command's changes.
COMMAND_SOURCE = "manage.py"


@dataclass(frozen=True)
class Actor:
    name: str  # user:<username>, command:<name>, system, anonymous
    user_id: int | None = None
    source: str = ""  # an IP address, manage.py, or ""


SYSTEM = Actor("system")


class _RequestActor:
    """A request's actor, worked out once, when the first change is recorded: requests that
    change nothing never read their session for it."""

    __slots__ = ("request", "_actor")

    def __init__(self, request: HttpRequest) -> None:
        self.request = request
        self._actor: Actor | None = None

    def __call__(self) -> Actor:
        if self._actor is None:
            self._actor = request_actor(self.request)
        return self._actor


def request_actor(request: HttpRequest) -> Actor:
    """The person logged in (or `anonymous`) and the address the request came from: the
    connection's (REMOTE_ADDR). Behind a proxy, daphne's `--proxy-headers` makes that the
    client's (docs/production.md); a header a client could write is never read here."""
    source = str(request.META.get("REMOTE_ADDR") or "")[:SOURCE_MAX]
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Actor(f"user:{user.get_username()}"[:ACTOR_MAX], user.pk, source)
    return Actor("anonymous", None, source)


_current: contextvars.ContextVar[Actor | _RequestActor | None] = contextvars.ContextVar(
    "a2a_audit_actor", default=None
)


def current_actor() -> Actor:
    """Who the change being made now is recorded as."""
    actor = _current.get()
    if actor is None:
        return SYSTEM
    return actor if isinstance(actor, Actor) else actor()


@contextlib.contextmanager
def acting_as(actor: Actor) -> Iterator[None]:
    """Record the changes made inside the block as `actor`'s."""
    token = _current.set(actor)
    try:
        yield
    finally:
        _current.reset(token)


# The paths where people make changes. Elsewhere (an agent card that makes its tenant's first
# signing key, the health checks) the platform acts for itself, as `system`, and the request's
# session is never read: reading it would add `Vary: Cookie` to a public card.
PEOPLES_PATHS = ("/console/", "/admin/")


class AuditContext:
    """Middleware: the changes a console or admin request makes are recorded as its person's,
    from its address."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if not request.path_info.startswith(PEOPLES_PATHS):
            return self.get_response(request)
        if self.is_async:
            return self._acall(request)
        token = _current.set(_RequestActor(request))
        try:
            return self.get_response(request)
        finally:
            _current.reset(token)

    async def _acall(self, request: HttpRequest) -> HttpResponseBase:
        token = _current.set(_RequestActor(request))
        try:
            response: Awaitable[HttpResponseBase] = self.get_response(request)
            return await response
        finally:
            _current.reset(token)


def command_name(command: BaseCommand) -> str:
    """A command's name: its module's, as manage.py finds it."""
    return type(command).__module__.rpartition(".")[2]


_wrapped = False


def commands_audited() -> None:
    """Wrap `BaseCommand.execute`, once, so every management command (ours, Django's
    createsuperuser or changepassword, a shell) acts as `command:<name>` from `manage.py`. A
    command called from inside a request (call_command) keeps the request's actor."""
    global _wrapped
    if _wrapped:
        return
    _wrapped = True
    execute = BaseCommand.execute

    @functools.wraps(execute)
    def audited_execute(self: BaseCommand, *args: Any, **options: Any) -> Any:
        name = command_name(self)
        if _current.get() is not None or name in SERVING_COMMANDS:
            return execute(self, *args, **options)
        with acting_as(Actor(f"command:{name}"[:ACTOR_MAX], None, COMMAND_SOURCE)):
            return execute(self, *args, **options)

    BaseCommand.execute = audited_execute  # type: ignore[method-assign]
