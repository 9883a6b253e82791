"""Console endpoints that act as the person logged in: Cancel and Reply on a task's page, Try it
on an agent's page.

Each calls the A2A operation the bindings call (tasks_app.operations: task_cancel,
message_send, message_stream) with a Caller whose principal is the person (`user:<username>`;
owners and operators act as tenant admins), so a console cancel or reply means what it means to
any client and is decided in the same place. A message is read as the bindings read a body
(bindings.wire, the same size bound) and parsed by the v1.0 codec. Each action is recorded
(console.services.task_action_record). Cancel and Reply answer JSON `{"ok", "message", ...}`;
Try it answers Server-Sent Events carrying the v1.0 stream events, as REST's `message:stream`
frames them. They take the login session and its CSRF token (X-CSRFToken); the A2A endpoints
keep refusing cookies.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from a2a.types import SendMessageRequest, TaskState
from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from a2a_platform.versions import V1_0
from agents.auth import Principal
from agents.models import Agent
from bindings.codecs import v10
from bindings.errors import problem_of, rest_body
from bindings.sse import SseStream, sse_response
from bindings.wire import BadJson, json_loads, unstorable_text
from tasks_app.models import Task
from tasks_app.operations import Caller, Stream, message_send, message_stream, task_cancel
from tasks_app.streams import StreamItem

from .scoping import MANAGING_ROLES, require_manager
from .selectors import User, agent_get_or_404, membership_role, task_get_or_404
from .services import TaskAction, task_action_record

# The owner string of a person's tasks: never an API key's (`key:...`) or the anonymous one.
PERSON_OWNER = "user:{username}"


class Refused(Exception):
    """A console action refused before any operation ran, with the status and the reason the
    page shows."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def person_principal(*, user: User, role: str) -> Principal:
    """The principal of a person in the console: their own owner string; owners and operators
    act as tenant admins (any of the tenant's tasks), members on their own tasks only."""
    return Principal(
        owner=PERSON_OWNER.format(username=user.get_username()),
        is_tenant_admin=role in MANAGING_ROLES,
    )


def _caller(user: User, agent: Agent, role: str) -> Caller:
    return Caller(agent=agent, principal=person_principal(user=user, role=role), dialect=V1_0)


def _task_to_act_on(user: User, tenant_slug: str, task_id: str) -> tuple[Task, str]:
    """The task (404 when the person cannot see it) and the person's role, once they may act on
    it (403 with the reason for members)."""
    task = task_get_or_404(user=user, tenant_slug=tenant_slug, task_id=task_id)
    require_manager(user, task.tenant)
    return task, membership_role(user=user, tenant=task.tenant)


def _agent_to_try(user: User, tenant_slug: str, agent_slug: str) -> tuple[Agent, str]:
    agent = agent_get_or_404(user=user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    return agent, membership_role(user=user, tenant=agent.tenant)


def _require_taking_messages(agent: Agent) -> None:
    """A disabled agent (or one of a deactivated tenant, which only operators still see) takes
    no messages from the console, as its A2A endpoints take none."""
    if not agent.tenant.is_active:
        raise Refused(
            409,
            f"Tenant {agent.tenant.slug} is deactivated: its agents take no messages until an "
            "operator activates it again.",
        )
    if not agent.is_active:
        raise Refused(
            409,
            f"Agent {agent.slug} is disabled: it takes no messages until an owner enables it "
            "again on its page.",
        )


def _text_sent(request: HttpRequest) -> str:
    """The text typed on the page, from a JSON body {"text": "..."}: bounded, parsed and
    checked as the A2A bindings read theirs."""
    if request.content_type != "application/json":
        raise Refused(
            415, 'Send the message as JSON, {"text": "..."}, with Content-Type application/json.'
        )
    try:
        raw = request.body
    except RequestDataTooBig:
        raise Refused(
            413,
            f"The message is too large: a request may carry at most "
            f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes (A2A_MAX_REQUEST_BYTES), as on the "
            "agent's A2A endpoints.",
        ) from None
    try:
        body = json_loads(raw)
    except BadJson as exc:
        raise Refused(400, str(exc)) from None
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str):
        raise Refused(400, 'The body must be a JSON object with the message as "text".')
    if not text.strip():
        raise Refused(400, "Type a message to send.")
    if problem := unstorable_text(text):
        raise Refused(400, f"The message {problem}.")
    return text


def _send_request(text: str, *, message_id: str, task: Task | None = None) -> SendMessageRequest:
    """A SendMessageRequest parsed by the v1.0 codec, as JSON-RPC and REST parse theirs: a new
    task's first message, or a reply to `task`, which the send does not wait for (the page's
    live stream shows what follows)."""
    message: dict[str, Any] = {
        "messageId": message_id,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    params: dict[str, Any] = {"message": message}
    if task is not None:
        message.update(taskId=str(task.pk), contextId=task.context_id)
        params["configuration"] = {"returnImmediately": True}
    return v10.v10_params(params, SendMessageRequest)


def _refusal(exc: BaseException) -> JsonResponse:
    """Any refusal as the page shows it: its status and one message. A2A's errors and the
    platform's are read as every binding reads them (bindings.errors.problem_of, which also
    logs anything unexpected and words it without detail)."""
    if isinstance(exc, Refused):
        status, message = exc.status, exc.message
    elif isinstance(exc, Http404):
        status, message = 404, str(exc) or "Not found."
    elif isinstance(exc, PermissionDenied):
        status, message = 403, str(exc)
    else:
        problem = problem_of(exc)
        status, message = problem.http_status, problem.message
    return JsonResponse({"ok": False, "message": message}, status=status)


def _recorded(entry: LogEntry, user: User) -> dict[str, str]:
    return {
        "at": entry.action_time.isoformat(),
        "by": user.get_username(),
        "what": entry.change_message,
    }


async def _record(
    user: User, task_id: uuid.UUID, action: TaskAction, role: str, **sent: str
) -> LogEntry:
    return await sync_to_async(task_action_record)(
        user=user, task_id=task_id, action=action, role=role, **sent
    )


@login_required
@require_POST
async def task_cancel_view(request: HttpRequest, tenant_slug: str, task_id: str) -> HttpResponse:
    """Cancel the task as the person: CancelTask's operation, answered as the task it left."""
    try:
        user = await request.auser()
        task, role = await sync_to_async(_task_to_act_on)(user, tenant_slug, task_id)
        # No check of the agent here: stopping work is always allowed, also on a disabled
        # agent (whose runs in flight go on, and whose deletion waits for them).
        result = await task_cancel(caller=_caller(user, task.agent, role), task_id=str(task.pk))
        entry = await _record(user, task.pk, "cancel", role)
    except Exception as exc:
        return _refusal(exc)
    state = TaskState.Name(result.status.state)
    return JsonResponse(
        {
            "ok": True,
            "message": f"the task is {state}.",
            "state": state,
            "task": v10.to_json(result),
            "recorded": _recorded(entry, user),
        }
    )


@login_required
@require_POST
async def task_reply_view(request: HttpRequest, tenant_slug: str, task_id: str) -> HttpResponse:
    """Reply to the task as the person: SendMessage's operation with the task's ids, not
    waiting for the agent; answered as the task the send left (or the agent's message)."""
    try:
        user = await request.auser()
        task, role = await sync_to_async(_task_to_act_on)(user, tenant_slug, task_id)
        _require_taking_messages(task.agent)
        text = _text_sent(request)
        message_id = str(uuid.uuid4())
        send = _send_request(text, message_id=message_id, task=task)
        result = await message_send(caller=_caller(user, task.agent, role), request=send)
        entry = await _record(user, task.pk, "reply", role, message_id=message_id, text=text)
    except Exception as exc:
        return _refusal(exc)
    answer = v10.to_json(v10.send_result(result))
    state = answer.get("task", {}).get("status", {}).get("state", "")
    return JsonResponse(
        {
            "ok": True,
            "message": "the agent has the reply; this page follows what it does next.",
            "state": state,
            **answer,
            "recorded": _recorded(entry, user),
        }
    )


async def _opening(items: Stream) -> StreamItem:
    """The stream's first event: a new task's opens it at once, as the send committed it."""
    while (item := await anext(items)) is None:
        pass  # keep-alives: none come before a new task's first event
    return item


async def _stream_from(first: StreamItem, items: Stream) -> AsyncIterator[StreamItem | None]:
    try:
        yield first
        async for item in items:
            yield item
    finally:
        await items.aclose()


@login_required
@require_POST
async def agent_try_view(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    """Try it: send the typed text to the agent as the person (a new task they own), then
    stream the task's events as SendStreamingMessage does, until its turn settles."""
    items: Stream | None = None
    try:
        user = await request.auser()
        agent, role = await sync_to_async(_agent_to_try)(user, tenant_slug, agent_slug)
        _require_taking_messages(agent)
        text = _text_sent(request)
        message_id = str(uuid.uuid4())
        send = _send_request(text, message_id=message_id)
        items = await message_stream(caller=_caller(user, agent, role), request=send)
        # The task exists once its first event is out: recorded before the stream is answered,
        # so a person who leaves at once still has the send on record.
        first = await _opening(items)
        await _record(user, first.task_id, "try", role, message_id=message_id, text=text)
    except Exception as exc:
        if items is not None:
            await items.aclose()
        return _refusal(exc)
    return sse_response(
        SseStream(_stream_from(first, items), v10.stream_json),
        wrap=lambda result: result,
        error_body=lambda exc: rest_body(problem_of(exc), V1_0),
    )
