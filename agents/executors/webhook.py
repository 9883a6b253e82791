"""The `webhook` executor: a bridge to the tenant's own HTTP service.

Each run POSTs the task's message, its history and a callback (URL and one-run token) to the
configured URL, signed like a push (X-A2A-Signature, the tenant's ES256 key). The service
either answers at once (200/201 with a reply: artifacts, a state, a message) or answers 202
and posts its events to the callback URL (bindings.callbacks) while the run waits for the
task to settle. The wire contract is docs/webhook-agents.md; the shapes a service sends are
read here (`reply_events`, `callback_events`) for both ways, so they cannot drift apart.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import secrets as secrets_module
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import Event, EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.conf import settings
from django.urls import reverse
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.struct_pb2 import Struct
from pydantic import BaseModel, ConfigDict, Field

from a2a_platform.db import db
from a2a_platform.ssrf import UnsafeUrl

from .outbound import ConnectionTestFailed, http_client, in_chain, url_problem
from .platform import PlatformRun, platform_run

logger = logging.getLogger(__name__)

# `token` goes as "Authorization: Bearer <token>" beside the X-A2A-Signature JWT.
SECRET_NAMES = ("token",)

USER_AGENT = "a2a-platform-webhook/1.0"
# Where the run keeps its callback token's digest in the task's executor state.
CALLBACK_STATE = "callback"
# A callback carries at most this many events.
MAX_CALLBACK_EVENTS = 100
# The cancel notice is a courtesy: it never holds up the cancel longer than this.
CANCEL_NOTICE_TIMEOUT_SECONDS = 5.0
CANCELED_TEXT = "Canceled at the caller's request."


class WebhookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="Your service's URL; each run is POSTed to it.", min_length=1, max_length=2000
    )
    timeout_seconds: float = Field(
        default=30,
        gt=0,
        le=600,
        description="How long the POST may take to answer (a 202 answers at once).",
    )
    callback_timeout_seconds: float = Field(
        default=3600,
        gt=0,
        le=7 * 24 * 3600,
        description="After a 202, how long the run waits for your service to post its final "
        "state before the task fails.",
    )


def save_check(config: WebhookConfig) -> dict[str, str]:
    problem = url_problem(config.url, "url")
    return {"url": problem} if problem else {}


def build(config: WebhookConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    return WebhookExecutor(config, token=secrets.get("token", ""))


# --- what a service sends back: a reply (sync) or callback events ---------------------------


class ReplyInvalid(ValueError):
    """What a service sent does not follow the contract; the message names where and why."""


STATES: dict[str, TaskState.ValueType] = {
    "completed": TaskState.TASK_STATE_COMPLETED,
    "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "auth-required": TaskState.TASK_STATE_AUTH_REQUIRED,
    "failed": TaskState.TASK_STATE_FAILED,
    "rejected": TaskState.TASK_STATE_REJECTED,
    "canceled": TaskState.TASK_STATE_CANCELED,
    "working": TaskState.TASK_STATE_WORKING,
}
# The states that end a service's part of a turn: nothing may follow them in one callback.
SETTLING = frozenset(STATES.values()) - {TaskState.TASK_STATE_WORKING}
_STATUS_FIELDS = frozenset({"state", "message", "artifacts", "metadata"})
_CHUNK_FIELDS = frozenset({"artifact", "append", "lastChunk", "metadata"})


def reply_events(body: Any, *, task_id: str, context_id: str) -> list[Event]:
    """The events of a synchronous reply `{"state", "message", "artifacts", "metadata"}`
    (state completed unless given; not working: the run ends with the reply), artifacts
    first. Raises ReplyInvalid."""
    return _status_events(body, "", task_id, context_id, callback=False)


def callback_events(body: Any, *, task_id: str, context_id: str) -> list[Event]:
    """The events of one callback: an event object or a list of them, each a status
    `{"state", "message"?, "artifacts"?, "metadata"?}` (state required) or an artifact chunk
    `{"artifact", "append"?, "lastChunk"?, "metadata"?}`. Nothing may follow a state other
    than working. Raises ReplyInvalid."""
    many = isinstance(body, list)
    items = body if many else [body]
    if not items:
        raise ReplyInvalid("an empty list carries no events.")
    if len(items) > MAX_CALLBACK_EVENTS:
        raise ReplyInvalid(f"{len(items)} events; send at most {MAX_CALLBACK_EVENTS} at a time.")
    events: list[Event] = []
    settled_at = ""
    for n, item in enumerate(items):
        path = f"[{n}]" if many else ""
        if settled_at:
            raise ReplyInvalid(f"{path}: comes after the final state at {settled_at}.")
        if isinstance(item, dict) and "artifact" in item:
            events.append(_chunk_event(item, path, task_id, context_id))
            continue
        events += _status_events(item, path, task_id, context_id, callback=True)
        if events[-1].status.state in SETTLING:  # type: ignore[union-attr]
            settled_at = path or "the top"
    return events


def _where(path: str, field: str) -> str:
    return f"{path}.{field}" if path else field


def _object(value: Any, path: str, allowed: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ReplyInvalid(f"{path or 'the body'}: must be a JSON object.")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise ReplyInvalid(
            f"{path or 'the body'}: unknown field {unknown[0]!r}; the fields are "
            f"{', '.join(sorted(allowed))}."
        )
    return value


def _status_events(
    value: Any, path: str, task_id: str, context_id: str, *, callback: bool
) -> list[Event]:
    body = _object(value, path, _STATUS_FIELDS)
    if "state" not in body and callback:
        raise ReplyInvalid(
            f"{_where(path, 'state')}: required in a status event (or send an 'artifact')."
        )
    state = _state(body.get("state", "completed"), _where(path, "state"), working=callback)
    artifacts = body.get("artifacts", [])
    if not isinstance(artifacts, list):
        raise ReplyInvalid(f"{_where(path, 'artifacts')}: must be a list.")
    events: list[Event] = [
        TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id=context_id,
            artifact=_artifact(a, f"{_where(path, 'artifacts')}[{n}]"),
            last_chunk=True,
        )
        for n, a in enumerate(artifacts)
    ]
    status = TaskStatus(state=state)
    status.timestamp.GetCurrentTime()
    if body.get("message") is not None:
        status.message.CopyFrom(
            _message(body["message"], _where(path, "message"), task_id, context_id)
        )
    event = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    if body.get("metadata") is not None:
        event.metadata.CopyFrom(_struct(body["metadata"], _where(path, "metadata")))
    return [*events, event]


def _chunk_event(value: dict[str, Any], path: str, task_id: str, context_id: str) -> Event:
    body = _object(value, path, _CHUNK_FIELDS)
    flags = {}
    for field in ("append", "lastChunk"):
        flag = body.get(field, False)
        if not isinstance(flag, bool):
            raise ReplyInvalid(f"{_where(path, field)}: must be true or false.")
        flags[field] = flag
    artifact = _artifact(body["artifact"], _where(path, "artifact"), need_id=flags["append"])
    event = TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=artifact,
        append=flags["append"],
        last_chunk=flags["lastChunk"],
    )
    if body.get("metadata") is not None:
        event.metadata.CopyFrom(_struct(body["metadata"], _where(path, "metadata")))
    return event


def _state(value: Any, path: str, *, working: bool) -> TaskState.ValueType:
    """A state by its v0.3 name ("input-required") or v1.0 name ("TASK_STATE_INPUT_REQUIRED")."""
    name = value.strip() if isinstance(value, str) else ""
    if name.upper().startswith("TASK_STATE_"):
        name = name[len("TASK_STATE_") :]
    name = name.lower().replace("_", "-")
    state = STATES.get(name)
    allowed = [n for n in STATES if working or n != "working"]
    if state is None:
        raise ReplyInvalid(f"{path}: {value!r} is not a state; use one of {', '.join(allowed)}.")
    if state == TaskState.TASK_STATE_WORKING and not working:
        raise ReplyInvalid(
            f"{path}: 'working' does not end a reply; answer 202 Accepted to keep working "
            "and post the state to the callback URL."
        )
    return state


def _parts(value: Any, path: str) -> list[Part]:
    if not isinstance(value, list) or not value:
        raise ReplyInvalid(f"{path}: must be a non-empty list of parts.")
    parts = []
    for n, item in enumerate(value):
        where = f"{path}[{n}]"
        if not isinstance(item, dict):
            raise ReplyInvalid(f'{where}: must be a JSON object such as {{"text": "..."}}.')
        part = _parse(item, Part(), where)
        if part.WhichOneof("content") is None:
            raise ReplyInvalid(f"{where}: a part holds one of text, data, url or raw.")
        parts.append(part)
    return parts


def _message(value: Any, path: str, task_id: str, context_id: str) -> Message:
    """An agent message: a plain string (one text part) or a v1.0 JSON message."""
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, task_id=task_id, context_id=context_id
    )
    if isinstance(value, str):
        if not value:
            raise ReplyInvalid(f"{path}: an empty text; leave the message out instead.")
        message.parts.add(text=value)
        return message
    if not isinstance(value, dict):
        raise ReplyInvalid(f"{path}: must be a text or a message object with 'parts'.")
    rest = {k: v for k, v in value.items() if k != "parts"}
    parsed = _parse(rest, Message(), path)
    if parsed.role not in (Role.ROLE_UNSPECIFIED, Role.ROLE_AGENT):
        raise ReplyInvalid(f"{_where(path, 'role')}: the service speaks as ROLE_AGENT.")
    for field, ours in (("task_id", task_id), ("context_id", context_id)):
        if getattr(parsed, field) not in ("", ours):
            name = "taskId" if field == "task_id" else "contextId"
            raise ReplyInvalid(f"{_where(path, name)}: is not this task's; leave it out.")
    parts = _parts(value.get("parts"), _where(path, "parts"))
    message.MergeFrom(parsed)
    message.role = Role.ROLE_AGENT
    message.task_id, message.context_id = task_id, context_id
    message.parts.extend(parts)
    return message


def _artifact(value: Any, path: str, *, need_id: bool = False) -> Artifact:
    if not isinstance(value, dict):
        raise ReplyInvalid(f"{path}: must be an artifact object with 'parts'.")
    if need_id and not value.get("artifactId"):
        raise ReplyInvalid(
            f"{_where(path, 'artifactId')}: required with append, naming the artifact to extend."
        )
    artifact = _parse({k: v for k, v in value.items() if k != "parts"}, Artifact(), path)
    artifact.parts.extend(_parts(value.get("parts"), _where(path, "parts")))
    if not artifact.artifact_id:
        artifact.artifact_id = str(uuid.uuid4())
    return artifact


def _struct(value: Any, path: str) -> Struct:
    if not isinstance(value, dict):
        raise ReplyInvalid(f"{path}: must be a JSON object.")
    return _parse(value, Struct(), path)


def _parse(value: dict[str, Any], proto: Any, path: str) -> Any:
    try:
        return ParseDict(value, proto)
    except (ParseError, TypeError, ValueError) as exc:
        reason = str(exc).splitlines()[0].strip() if str(exc).strip() else type(exc).__name__
        if 'no field named "kind"' in reason:
            reason += ' (parts are v1.0 JSON such as {"text": "..."}, without "kind")'
        raise ReplyInvalid(f"{path or 'the body'}: {reason}") from None


# --- the requests to the service --------------------------------------------------------------


def token_digest(token: str) -> str:
    """What is kept of a callback token: its SHA-256, hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def callback_url(task_id: str) -> str:
    return settings.A2A_PUBLIC_BASE_URL + reverse("webhook-callback", args=[task_id])


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


def _signature(tenant_slug: str, body: bytes, task_id: str) -> str:
    """The X-A2A-Signature of `body` (blocking: the tenant's key is read, made on first use)."""
    from agents.models import Tenant
    from agents.signing import push_signature

    tenant = Tenant.objects.filter(slug=tenant_slug).first()
    if tenant is None:
        raise ServiceFailed(f"Cannot sign the request: there is no tenant {tenant_slug!r}.")
    return push_signature(tenant=tenant, body=body, task_id=task_id)


class ServiceFailed(Exception):
    """The service could not be reached or answered badly; the message, one line for the
    tenant, names what happened."""


def _seconds(value: float) -> str:
    return f"{value:g} s"


async def _post(
    config: WebhookConfig,
    *,
    tenant_slug: str,
    task_id: str,
    payload: dict[str, Any],
    token: str,
    timeout: float,
) -> tuple[int, bytes]:
    """POST `payload`, signed, to the service: its status and body. Raises ServiceFailed."""
    body = _encode(payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-A2A-Signature": await db(_signature)(tenant_slug, body, task_id),
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    limit = settings.A2A_MAX_REQUEST_BYTES
    try:
        async with asyncio.timeout(timeout), http_client(timeout=timeout) as client:
            request = client.build_request("POST", config.url, content=body, headers=headers)
            response = await client.send(request, stream=True)
            try:
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > limit:
                        raise ServiceFailed(f"Your service's reply is larger than {limit} bytes.")
            finally:
                await response.aclose()
    except ServiceFailed:
        raise
    except (TimeoutError, httpx.TimeoutException):
        raise ServiceFailed(
            f"Your service did not answer within {_seconds(timeout)} (timeout_seconds)."
        ) from None
    except Exception as exc:
        refusal = in_chain(exc, UnsafeUrl)
        if refusal is not None:
            raise ServiceFailed(refusal.reason) from None
        if isinstance(exc, httpx.HTTPError):
            raise ServiceFailed(
                f"Could not reach your service: {exc or type(exc).__name__}."
            ) from None
        raise
    return response.status_code, bytes(data)


class WebhookExecutor(AgentExecutor):
    """One run: POST the turn to the service, then map its reply, or wait for its callbacks."""

    def __init__(self, config: WebhookConfig, *, token: str = "") -> None:
        self.config = config
        self._token = token
        self._posted = False  # the service has (or may have) heard of this run

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        run = platform_run(context)
        updater = TaskUpdater(event_queue, run.task_id, run.context_id)
        callback_token = secrets_module.token_urlsafe(32)
        expires_at = datetime.now(UTC) + timedelta(
            seconds=self.config.timeout_seconds + self.config.callback_timeout_seconds
        )
        # The digest is in place before the task is working: until then a callback finds the
        # task settled (a follow-up turn) or meets the token of no run.
        await run.state_save(
            {
                CALLBACK_STATE: {
                    "tokenSha256": token_digest(callback_token),
                    "expiresAt": _iso(expires_at),
                }
            }
        )
        await updater.start_work()
        mark = await run.events_mark()  # a callback may settle the task before the 202 arrives
        task = context.current_task
        payload = {
            "taskId": run.task_id,
            "contextId": run.context_id,
            "agent": run.agent_path,
            "message": MessageToDict(context.message) if context.message else None,
            "history": [MessageToDict(m) for m in (task.history if task else [])],
            "callback": {
                "url": callback_url(run.task_id),
                "token": callback_token,
                "expiresAt": _iso(expires_at),
            },
        }
        self._posted = True
        try:
            status, body = await _post(
                self.config,
                tenant_slug=run.agent_path.partition("/")[0],
                task_id=run.task_id,
                payload=payload,
                token=self._token,
                timeout=self.config.timeout_seconds,
            )
            if status == 202:
                await self._wait(run, updater, mark)
                return
            events = _reply(status, body, run)
        except ServiceFailed as exc:
            await updater.failed(updater.new_agent_message([Part(text=str(exc))]))
            return
        for event in events:
            await event_queue.enqueue_event(event)

    async def _wait(self, run: PlatformRun, updater: TaskUpdater, mark: int) -> None:
        timeout = self.config.callback_timeout_seconds
        if await run.wait_settled(after=mark, timeout=timeout):
            return
        await updater.failed(
            updater.new_agent_message(
                [
                    Part(
                        text="Your service accepted the task (HTTP 202) but posted no final "
                        f"state within {_seconds(timeout)} (callback_timeout_seconds)."
                    )
                ]
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        run = platform_run(context)
        updater = TaskUpdater(event_queue, run.task_id, run.context_id)
        await updater.cancel(updater.new_agent_message([Part(text=CANCELED_TEXT)]))
        if not self._posted:
            return
        await run.events_mark()  # canceled (and so closed to callbacks) before the notice goes
        notice = {
            "cancel": True,
            "taskId": run.task_id,
            "contextId": run.context_id,
            "agent": run.agent_path,
        }
        try:
            await _post(
                self.config,
                tenant_slug=run.agent_path.partition("/")[0],
                task_id=run.task_id,
                payload=notice,
                token=self._token,
                timeout=min(self.config.timeout_seconds, CANCEL_NOTICE_TIMEOUT_SECONDS),
            )
        except ServiceFailed as exc:
            logger.info("The cancel notice of task %s did not get through: %s", run.task_id, exc)


def _reply(status: int, body: bytes, run: PlatformRun) -> list[Event]:
    """The events of a synchronous answer. Raises ServiceFailed."""
    if not 200 <= status < 300:
        raise ServiceFailed(f"Your service answered HTTP {status}.")
    try:
        data = json.loads(body)
    except ValueError as exc:
        reason = "the body is empty" if not body.strip() else f"the body is not JSON ({exc})"
        raise ServiceFailed(
            f"Your service's reply is not valid: {reason}; answer 200 with a JSON reply, or "
            "202 Accepted and post to the callback URL."
        ) from None
    try:
        return reply_events(data, task_id=run.task_id, context_id=run.context_id)
    except ReplyInvalid as exc:
        raise ServiceFailed(f"Your service's reply is not valid: {exc}") from None


async def connection_test(
    config: WebhookConfig, secrets: Mapping[str, str], *, agent_path: str = ""
) -> str:
    """POST a ping `{"ping": true, "agent": ...}` to the service, signed and authorized as a
    turn is (X-A2A-Signature, and the token secret when set); any 2xx passes. A 401 or 403
    fails the test naming what the service checks: the token, if one is set, and the
    signature. Without a token the answer says that the ping carried the signature alone.
    `agent_path` ("tenant/agent") names whose key signs it."""
    if "/" not in agent_path:
        raise ConnectionTestFailed(
            "Cannot sign the test ping: the caller did not say which agent (tenant/agent) "
            "it is for."
        )
    tenant_slug = agent_path.partition("/")[0]
    token = secrets.get("token", "")
    payload = {"ping": True, "agent": agent_path, "sentAt": _iso(datetime.now(UTC))}
    started = time.monotonic()
    try:
        status, _ = await _post(
            config,
            tenant_slug=tenant_slug,
            task_id="",
            payload=payload,
            token=token,
            timeout=config.timeout_seconds,
        )
    except ServiceFailed as exc:
        raise ConnectionTestFailed(str(exc)) from None
    elapsed = round((time.monotonic() - started) * 1000)
    jwks = f"{settings.A2A_PUBLIC_BASE_URL}/a2a/{tenant_slug}/.well-known/jwks.json"
    if status in (401, 403) and token:
        raise ConnectionTestFailed(
            f"Your service refused the token (Authorization: Bearer) or the X-A2A-Signature: "
            f"HTTP {status}. Check that it expects this agent's token secret, and that it "
            f"verifies signatures against {jwks}."
        )
    if status in (401, 403):
        raise ConnectionTestFailed(
            f"Your service refused the ping: HTTP {status}. No token is set: if it expects "
            f"one, set this agent's token secret; if it checks only the X-A2A-Signature, check "
            f"that it verifies signatures against {jwks}."
        )
    if not 200 <= status < 300:
        raise ConnectionTestFailed(
            f"Your service answered HTTP {status}; it must answer a ping with 2xx."
        )
    if not token:
        return (
            f"Your service answered HTTP {status} in {elapsed} ms. No token is set, so the ping "
            "carried only the X-A2A-Signature (no Authorization header)."
        )
    return f"Your service answered HTTP {status} in {elapsed} ms; the ping carried the token."
