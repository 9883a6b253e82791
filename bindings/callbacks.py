"""The callback endpoint of `webhook` agents: where a tenant's service posts the events of a
run it accepted with 202 (docs/webhook-agents.md).

`POST /callbacks/<task id>/` with `Authorization: Bearer <the run's callback token>` and one
event or a list of them. The run keeps only the token's SHA-256 (agents.executors.webhook);
the service here re-reads it under the task's row lock, in the transaction that records the
events, so a callback racing a cancel (or the run's own end) either lands before it or is
refused after it, never half. A settled task (terminal, or waiting for the user) takes no
more callbacks: the next run of a task posts a new token. Every answer is JSON: `{"error":
{"code", "message"}}` with 400, 401, 404, 405, 409 or 413 when refused (503 only when the
platform itself could not record it).
"""

from __future__ import annotations

import hmac
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from a2a_platform.db import db
from agents.executors.webhook import (
    CALLBACK_STATE,
    ReplyInvalid,
    callback_events,
    token_digest,
)
from tasks_app import rowsql
from tasks_app.models import Task
from tasks_app.selectors import executor_state
from tasks_app.services import task_events_record
from tasks_app.streams import SETTLED_STATES

from .wire import BadJson, json_loads, unstorable_text

logger = logging.getLogger(__name__)


class CallbackRefused(Exception):
    """A callback that is not taken; the HTTP status, a code and one sentence for the
    service's developer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass(frozen=True)
class CallbackRecorded:
    count: int  # events stored
    state: str  # the task's state after them


def webhook_callback_record(*, task_id: str, token: str, body: bytes) -> CallbackRecorded:
    """Record the events of a callback on task `task_id`, all or none. Raises CallbackRefused:
    404 unknown task, 401 a token that is not the run's (or expired), 409 a settled or
    canceling task, 400 a body that is not events (checked only once the caller is known)."""
    try:
        pk = uuid.UUID(task_id)
    except ValueError:
        raise _unknown(task_id) from None
    with transaction.atomic():
        task = rowsql.lock(Task, pk)
        if task is None:
            raise _unknown(task_id)
        kept = executor_state(task_id=pk).get(CALLBACK_STATE) or {}
        digest = str(kept.get("tokenSha256", ""))
        if not (token and digest and hmac.compare_digest(token_digest(token), digest)):
            raise CallbackRefused(
                401, "unauthenticated", "The Bearer token is not this task's callback token."
            )
        if task.state in SETTLED_STATES:
            raise CallbackRefused(
                409,
                "task_settled",
                f"Task {task_id} is {task.state}: it takes no more callbacks (a follow-up "
                "message starts a new run with a new token).",
            )
        if task.cancel_requested:
            raise CallbackRefused(
                409,
                "task_canceling",
                f"Task {task_id} is being canceled: it takes no more callbacks.",
            )
        expires_at = _when(kept.get("expiresAt"))
        if expires_at is not None and timezone.now() > expires_at:
            raise CallbackRefused(
                401, "token_expired", f"The callback token expired at {kept['expiresAt']}."
            )
        try:
            payload = json_loads(body)
        except BadJson as exc:
            raise CallbackRefused(400, "invalid_json", str(exc)) from None
        if problem := unstorable_text(payload):
            raise CallbackRefused(400, "invalid_event", f"Strings {problem}.")
        try:
            events = callback_events(payload, task_id=str(pk), context_id=task.context_id)
        except ReplyInvalid as exc:
            raise CallbackRefused(
                400, "invalid_event", f"The events are not valid: {exc}"
            ) from None
        recorded = task_events_record(task_id=pk, events=events)
        if recorded.error is not None:  # raised out of the transaction: none is kept
            raise CallbackRefused(400, "invalid_event", recorded.error.message)
        state = Task.objects.values_list("state", flat=True).get(pk=pk)
    return CallbackRecorded(recorded.count, state)


def _unknown(task_id: str) -> CallbackRefused:
    return CallbackRefused(404, "task_not_found", f"No task {task_id!r} takes callbacks here.")


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _error(status: int, code: str, message: str) -> JsonResponse:
    response = JsonResponse({"error": {"code": code, "message": message}}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="a2a-callback"'
    return response


def _bearer(header: str) -> str:
    scheme, _, token = header.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


@csrf_exempt
async def webhook_callback(request: HttpRequest, task_id: str) -> JsonResponse:
    """`POST /callbacks/<task id>/`: a tenant's service reports on a run it accepted."""
    if request.method != "POST":
        response = _error(405, "method_not_allowed", "Callbacks are POSTed to this URL.")
        response["Allow"] = "POST"
        return response
    try:
        body = request.body
    except RequestDataTooBig:
        return _error(
            413,
            "too_large",
            f"The body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; send fewer events "
            "per callback.",
        )
    token = _bearer(request.headers.get("Authorization", ""))
    try:
        recorded = await db(webhook_callback_record)(task_id=task_id, token=token, body=body)
    except CallbackRefused as exc:
        return _error(exc.status, exc.code, exc.message)
    except Exception:  # the database, say: nothing was recorded, and a retry may succeed
        logger.exception("Callback for task %s not recorded", task_id)
        response = _error(503, "unavailable", "The callback was not recorded; retry shortly.")
        response["Retry-After"] = "5"
        return response
    return JsonResponse({"recorded": recorded.count, "state": recorded.state})
