"""The JSON-RPC 2.0 binding: one POST endpoint per agent, in v1.0, v0.3 and v0.1.

Each method parses its params with its dialect's codec (bindings.codecs), calls one operation,
and renders the answer with the codec. The envelope (batches, notifications, ids) follows
JSON-RPC 2.0; errors are translated once, by bindings.errors.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as v03types
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.types import Task as TaskProto
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from a2a_platform.db import db
from a2a_platform.versions import V0_1, V0_3, V1_0
from agents.cards import agent_card_build
from agents.errors import AuthenticationRequired, InsufficientScope, LimitExceeded
from push_app.operations import (
    push_config_create,
    push_config_delete,
    push_config_get,
    push_config_list,
)
from tasks_app.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
)
from tasks_app.operations import (
    Caller,
    TaskOrigin,
    extended_card_get,
    message_send,
    message_stream,
    task_cancel,
    task_get,
    task_list,
    task_origin,
    task_subscribe,
)
from tasks_app.selectors import task_artifact_ids

from .callers import admitted, dialect_of, http_caller, http_identify, unversioned_dialect
from .codecs import v01, v03, v10
from .errors import (
    BodyTooLarge,
    MethodNotAllowed,
    UnsupportedMediaType,
    jsonrpc_error,
    jsonrpc_response,
    problem_of,
)
from .sse import SseStream, sse_response
from .wire import BadJson, json_loads, unstorable_text

Handler = Callable[[Caller, dict[str, Any]], Awaitable[Any]]


# --- v1.0 -----------------------------------------------------------------------------


async def v10_send(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, SendMessageRequest)
    return v10.to_json(v10.send_result(await message_send(caller=call, request=request)))


async def v10_get(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, GetTaskRequest)
    return await task_get(caller=call, request=request, as_json=True)


async def v10_list(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, ListTasksRequest)
    return v10.v10_list_result(request, await task_list(caller=call, request=request))


async def v10_cancel(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, CancelTaskRequest)
    return v10.to_json(await task_cancel(caller=call, task_id=request.id, tenant=request.tenant))


async def v10_extended_card(call: Caller, params: dict[str, Any]) -> Any:
    return v10.to_json(await extended_card_get(caller=call))


async def v10_send_streaming(call: Caller, params: dict[str, Any]) -> SseStream:
    request = v10.v10_params(params, SendMessageRequest)
    return SseStream(await message_stream(caller=call, request=request), v10.stream_json)


async def v10_subscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request = v10.v10_params(params, SubscribeToTaskRequest)
    stream = await task_subscribe(
        caller=call, task_id=request.id, last_event_id=call.last_event_id, tenant=request.tenant
    )
    return SseStream(stream, v10.stream_json)


async def v10_push_create(call: Caller, params: dict[str, Any]) -> Any:
    config = v10.v10_params(params, TaskPushNotificationConfig)
    return v10.to_json(await push_config_create(caller=call, config=config))


async def v10_push_get(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, GetTaskPushNotificationConfigRequest)
    config = await push_config_get(
        caller=call, task_id=request.task_id, config_id=request.id, tenant=request.tenant
    )
    return v10.to_json(config)


async def v10_push_list(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, ListTaskPushNotificationConfigsRequest)
    return v10.to_json(await push_config_list(caller=call, request=request))


async def v10_push_delete(call: Caller, params: dict[str, Any]) -> Any:
    request = v10.v10_params(params, DeleteTaskPushNotificationConfigRequest)
    await push_config_delete(
        caller=call, task_id=request.task_id, config_id=request.id, tenant=request.tenant
    )
    return {}


# --- v0.3 -----------------------------------------------------------------------------


async def v03_send(call: Caller, params: dict[str, Any]) -> Any:
    request = v03.v03_request(v03types.SendMessageRequest, "message/send", params)
    core = v03.v03_convert("message/send", conversions.to_core_send_message_request, request)
    return v03.send_result(await message_send(caller=call, request=core), "json")


async def v03_get(call: Caller, params: dict[str, Any]) -> Any:
    request = v03.v03_request(v03types.GetTaskRequest, "tasks/get", params)
    core = v03.v03_convert("tasks/get", conversions.to_core_get_task_request, request)
    return v03.task_out(await task_get(caller=call, request=core), "json")


async def v03_list(call: Caller, params: dict[str, Any]) -> Any:
    request = v03.v03_convert("tasks/list", v03.v03_list_request, params)
    return v03.list_result(request, await task_list(caller=call, request=request), "json")


async def v03_cancel(call: Caller, params: dict[str, Any]) -> Any:
    request = v03.v03_request(v03types.CancelTaskRequest, "tasks/cancel", params)
    return v03.task_out(await task_cancel(caller=call, task_id=request.params.id), "json")


async def v03_extended_card(call: Caller, params: dict[str, Any]) -> Any:
    return v03.card_out(await extended_card_get(caller=call), "json")


async def v03_stream(call: Caller, params: dict[str, Any]) -> SseStream:
    request = v03.v03_request(v03types.SendStreamingMessageRequest, "message/stream", params)
    core = v03.v03_convert("message/stream", conversions.to_core_send_message_request, request)
    return SseStream(await message_stream(caller=call, request=core), v03.stream_renderer("json"))


async def v03_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request = v03.v03_request(v03types.TaskResubscriptionRequest, "tasks/resubscribe", params)
    stream = await task_subscribe(
        caller=call, task_id=request.params.id, last_event_id=call.last_event_id
    )
    return SseStream(stream, v03.stream_renderer("json"))


async def v03_push_set(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/set"
    request = v03.v03_request(v03types.SetTaskPushNotificationConfigRequest, method, params)
    core = v03.v03_convert(
        method, conversions.to_core_create_task_push_notification_config_request, request
    )
    return v03.push_config_out(await push_config_create(caller=call, config=core), "json")


def _v03_push_params(params: dict[str, Any], *, names_config: bool) -> dict[str, Any]:
    """The params of tasks/pushNotificationConfig/get, list and delete in the specification's
    spelling (`id`, `pushNotificationConfigId`). The v0.3 endpoint summary
    (a2a-v0.3.0-endpoints-zh.md, 3.3.2-3.3.4) spells them `taskId` and `configId`: either is
    taken; both, naming different things, are refused rather than one silently chosen."""
    aliases = [("taskId", "id")]
    if names_config:
        aliases.append(("configId", "pushNotificationConfigId"))
    spelled = dict(params)
    for alias, name in aliases:
        if alias not in spelled:
            continue
        value = spelled.pop(alias)
        if name in spelled and spelled[name] != value:
            raise InvalidParamsError(
                f"'{alias}' {str(value)[:100]!r} and '{name}' {str(spelled[name])[:100]!r} "
                "differ: they are two spellings of one param; send one of them, or the same "
                "value in both."
            )
        spelled[name] = value
    return spelled


async def v03_push_get(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/get"
    params = _v03_push_params(params, names_config=True)
    request = v03.v03_request(v03types.GetTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_get_task_push_notification_config_request(request)
    config = await push_config_get(caller=call, task_id=core.task_id, config_id=core.id)
    return v03.push_config_out(config, "json")


async def v03_push_list(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/list"
    params = _v03_push_params(params, names_config=False)
    request = v03.v03_request(v03types.ListTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_list_task_push_notification_config_request(request)
    response = await push_config_list(caller=call, request=core)
    return [v03.push_config_out(config, "json") for config in response.configs]


async def v03_push_delete(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/delete"
    params = _v03_push_params(params, names_config=True)
    request = v03.v03_request(v03types.DeleteTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_delete_task_push_notification_config_request(request)
    await push_config_delete(caller=call, task_id=core.task_id, config_id=core.id)
    return None


# --- v0.1 -----------------------------------------------------------------------------


async def _v01_continue_or_create(
    call: Caller, request: SendMessageRequest, task_id: uuid.UUID | None
) -> tuple[SendMessageRequest, uuid.UUID | None]:
    """A v0.1 send continues the caller's task with the client's id if there is one, and
    creates the task with that id otherwise. Returns the request to send (with
    message.taskId set when it continues) and the id to create the task with (None when it
    continues, or when the client chose no id)."""
    if task_id is None:
        return request, None
    try:
        await task_get(caller=call, request=GetTaskRequest(id=str(task_id), history_length=0))
    except TaskNotFoundError:
        return request, task_id
    continued = SendMessageRequest()
    continued.CopyFrom(request)
    continued.message.task_id = str(task_id)
    return continued, None


def _v01_caller(call: Caller, params: dict[str, Any]) -> Caller:
    """The caller, carrying an inline push config's headers to the send, and how the client
    wrote the task's id (a task it creates keeps that, for its push notifications)."""
    return dataclasses.replace(
        call, push_headers=v01.v01_push_headers(params), spelling=v01.v01_id_spelling(params)
    )


async def v01_send(call: Caller, params: dict[str, Any]) -> Any:
    request, task_id = v01.v01_send_request(params)
    call = _v01_caller(call, params)
    if task_id is None:
        # The server chooses the id, here: the task is found by it if the agent answers with
        # a Message, which does not say which task it answers.
        new_task_id: uuid.UUID | None = uuid.uuid4()
    else:
        request, new_task_id = await _v01_continue_or_create(call, request, task_id)
    task_pk = request.message.task_id or str(new_task_id)
    sent_id = v01.v01_sent_id(params)
    result = await message_send(caller=call, request=request, new_task_id=new_task_id)
    if isinstance(result, TaskProto):
        return v01.v01_task_json(result, task_id=sent_id)
    # The agent answered with a Message; its task holds it, and v0.1 answers with the task.
    task_request = GetTaskRequest(id=task_pk)
    if request.configuration.HasField("history_length"):
        task_request.history_length = request.configuration.history_length
    task = await task_get(caller=call, request=task_request)
    return v01.v01_task_json(task, reply=result, task_id=sent_id)


async def v01_send_subscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request, task_id = v01.v01_send_request(params)
    call = _v01_caller(call, params)
    request, new_task_id = await _v01_continue_or_create(call, request, task_id)
    stream = await message_stream(caller=call, request=request, new_task_id=new_task_id)
    return SseStream(stream, v01.stream_renderer(task_id=v01.v01_sent_id(params)))


async def v01_get(call: Caller, params: dict[str, Any]) -> Any:
    request = v01.v01_get_request(params)
    return v01.v01_task_json(await task_get(caller=call, request=request), task_id=request.id)


async def v01_cancel(call: Caller, params: dict[str, Any]) -> Any:
    task_id = v01.v01_task_id(params)
    return v01.v01_task_json(await task_cancel(caller=call, task_id=task_id), task_id=task_id)


async def v01_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    task_id = v01.v01_task_id(params)
    stream = await task_subscribe(caller=call, task_id=task_id, last_event_id=call.last_event_id)
    # A replay sends no snapshot, so v0.1's artifact numbers continue from the task's own.
    known = await db(task_artifact_ids)(task_id=task_id)
    return SseStream(stream, v01.stream_renderer(known, task_id=task_id))


async def v01_get_card(call: Caller, params: dict[str, Any]) -> Any:
    return v01.v01_card_json(await db(agent_card_build)(call.agent))


async def v01_push_set(call: Caller, params: dict[str, Any]) -> Any:
    config, headers = v01.v01_push_set_request(params)
    return v01.v01_push_config_json(
        await push_config_create(caller=call, config=config, headers=headers)
    )


async def v01_push_get(call: Caller, params: dict[str, Any]) -> Any:
    task_id = v01.v01_push_get_task_id(params)
    # v0.1 names no config: the task's first.
    config = await push_config_get(caller=call, task_id=task_id, config_id="")
    return v01.v01_push_config_json(config)


# --- no version header: the dialect of the task's creator -------------------------------------


class AnsweredIn(Exception):
    """An error to answer in `dialect`, which the handler learned from the task (the request
    itself named none)."""

    def __init__(self, error: Exception, dialect: str) -> None:
        super().__init__(str(error))
        self.error = error
        self.dialect = dialect


def _task_in(dialect: str, task: TaskProto, sent_id: str) -> Any:
    """A task in `dialect`'s JSON-RPC shape (v0.1 with the id as the client wrote it)."""
    if dialect == V0_1:
        return v01.v01_task_json(task, task_id=sent_id)
    if dialect == V1_0:
        return v10.to_json(task)
    return v03.task_out(task, "json")


def _spoken(origin: TaskOrigin | None) -> str:
    """The dialect a version-less call on a task answers in: its creator's, where recorded
    ("" marks tasks older than Task.dialect: they answer in v0.3, as they always did)."""
    return origin.dialect if origin is not None and origin.dialect in (V0_1, V1_0) else V0_3


async def unversioned_get(call: Caller, params: dict[str, Any]) -> Any:
    """tasks/get without A2A-Version: read in v0.3's params (v0.1's are the same, and a v1.0
    client's `tenant` is not needed here), answered in the creator's dialect. The origin comes
    with the task, in its one query."""
    request = v03.v03_request(v03types.GetTaskRequest, "tasks/get", params)
    core = v03.v03_convert("tasks/get", conversions.to_core_get_task_request, request)
    task, origin = await task_get(caller=call, request=core, with_origin=True)
    dialect = _spoken(origin)
    if dialect != V0_3 and request.params.history_length == 0:
        del task.history[:]  # 0 is "no history" in v0.1 and v1.0, "no limit" in v0.3
    return _task_in(dialect, task, request.params.id)


async def unversioned_cancel(call: Caller, params: dict[str, Any]) -> Any:
    """tasks/cancel without A2A-Version: answered in the creator's dialect, its refusal of a
    finished task too (v0.1 reports it as a server error)."""
    request = v03.v03_request(v03types.CancelTaskRequest, "tasks/cancel", params)
    task_id = request.params.id
    try:
        task, origin = await task_cancel(caller=call, task_id=task_id, with_origin=True)
    except TaskNotCancelableError as exc:
        raise AnsweredIn(exc, _spoken(await task_origin(caller=call, task_id=task_id))) from None
    return _task_in(_spoken(origin), task, task_id)


async def unversioned_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    """tasks/resubscribe without A2A-Version: the stream (and its errors) in the creator's
    dialect, its params read by that dialect's codec."""
    request = v03.v03_request(v03types.TaskResubscriptionRequest, "tasks/resubscribe", params)
    dialect = _spoken(await task_origin(caller=call, task_id=request.params.id))
    subscribe = {V0_1: v01_resubscribe, V1_0: v10_subscribe, V0_3: v03_resubscribe}[dialect]
    try:
        return await subscribe(dataclasses.replace(call, dialect=dialect), params)
    except A2AError as exc:
        raise AnsweredIn(exc, dialect) from None


# Sent without a version (which reads as v0.3), these act on one task, and are answered in
# the dialect of the request that created it (docs/decisions.md, "JSON-RPC without a version
# header").
UNVERSIONED: dict[str, Handler] = {
    "tasks/get": unversioned_get,
    "tasks/cancel": unversioned_cancel,
    "task/cancel": unversioned_cancel,
    "tasks/resubscribe": unversioned_resubscribe,
}


STREAMING_METHODS = frozenset(
    {
        "SendStreamingMessage",
        "SubscribeToTask",
        "message/stream",
        "tasks/resubscribe",
        "tasks/sendSubscribe",
    }
)

METHODS: dict[str, dict[str, Handler]] = {
    V1_0: {
        "SendMessage": v10_send,
        "GetTask": v10_get,
        "ListTasks": v10_list,
        "CancelTask": v10_cancel,
        "GetExtendedAgentCard": v10_extended_card,
        "SendStreamingMessage": v10_send_streaming,
        "SubscribeToTask": v10_subscribe,
        "CreateTaskPushNotificationConfig": v10_push_create,
        "GetTaskPushNotificationConfig": v10_push_get,
        "ListTaskPushNotificationConfigs": v10_push_list,
        "DeleteTaskPushNotificationConfig": v10_push_delete,
    },
    V0_3: {
        "message/send": v03_send,
        "tasks/get": v03_get,
        "tasks/list": v03_list,
        "tasks/cancel": v03_cancel,
        # The transport mapping table (a2a-transport-mapping.md) names the method so.
        "task/cancel": v03_cancel,
        "agent/getAuthenticatedExtendedCard": v03_extended_card,
        "message/stream": v03_stream,
        "tasks/resubscribe": v03_resubscribe,
        "tasks/pushNotificationConfig/set": v03_push_set,
        "tasks/pushNotificationConfig/get": v03_push_get,
        "tasks/pushNotificationConfig/list": v03_push_list,
        "tasks/pushNotificationConfig/delete": v03_push_delete,
    },
    V0_1: {
        "tasks/send": v01_send,
        "tasks/sendSubscribe": v01_send_subscribe,
        "tasks/get": v01_get,
        "tasks/cancel": v01_cancel,
        "tasks/resubscribe": v01_resubscribe,
        "agent/getCard": v01_get_card,
        "tasks/pushNotification/get": v01_push_get,
        "tasks/pushNotification/set": v01_push_set,
    },
}


# --- the JSON-RPC 2.0 envelope ----------------------------------------------------------


# Methods only v0.1 has: a request without a version that uses one speaks v0.1.
V01_ONLY_METHODS = frozenset(METHODS[V0_1]) - frozenset(METHODS[V0_3])


def _effective_dialect(dialect: str, method: str, *, versioned: bool, call: Caller) -> str:
    """The version a request object speaks: the request's, except that a 0.3 one speaks 0.1
    when its method is one only v0.1 has, and one without a header also when its method is
    v0.1's too and the agent serves 0.1 but not 0.3 (`unversioned_dialect`)."""
    if dialect != V0_3 or method not in METHODS[V0_1]:
        return dialect
    if method in V01_ONLY_METHODS:
        return V0_1
    return dialect if versioned else unversioned_dialect(call.agent)


def _method_not_found(dialect: str, method: str) -> MethodNotFoundError:
    for other in (V1_0, V0_3, V0_1):
        if other != dialect and method in METHODS[other]:
            return MethodNotFoundError(
                f"{method!r} is an A2A {other} method but this request speaks {dialect}; "
                f"send the header 'A2A-Version: {other}' to use it."
            )
    return MethodNotFoundError(
        f"Method {method!r} does not exist in A2A {dialect}; known methods: "
        f"{', '.join(METHODS[dialect])}."
    )


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


@dataclass(frozen=True)
class StreamAnswer:
    request_id: Any
    stream: SseStream


async def _dispatch_one(
    call: Caller, dialect: str, body: Any, *, in_batch: bool = False, versioned: bool = True
) -> dict[str, Any] | StreamAnswer | None:
    """Answer one request object; None for a notification. `versioned`: the request named
    its version (A2A-Version); without one, a call on a task answers in its creator's."""
    if not isinstance(body, dict):
        return jsonrpc_response(None, InvalidRequestError("Each request must be a JSON object."))
    request_id = body.get("id")
    is_notification = "id" not in body
    if not _valid_id(request_id):
        return jsonrpc_response(
            None, InvalidRequestError("'id' must be a string, an integer or null.")
        )
    if body.get("jsonrpc") != "2.0":
        return jsonrpc_response(
            request_id, InvalidRequestError("'jsonrpc' must be exactly \"2.0\".")
        )
    method = body.get("method")
    if not isinstance(method, str) or not method:
        return jsonrpc_response(
            request_id, InvalidRequestError("'method' must be a non-empty string.")
        )
    params = body.get("params", {})
    try:
        dialect = _effective_dialect(dialect, method, versioned=versioned, call=call)
        if call.dialect != dialect:  # a v0.1 method sent without a version header
            call = dataclasses.replace(call, dialect=dialect)
        # Each request object is one A2A call, admitted in the version it speaks: counted
        # against the request rates once its envelope can be answered (a malformed one is
        # answered as such, uncounted).
        call = await admitted(call)
        handler = METHODS[dialect].get(method)
        if handler is None:
            raise _method_not_found(dialect, method)
        if not versioned and dialect == V0_3:
            handler = UNVERSIONED.get(method, handler)
        if not isinstance(params, dict):
            raise InvalidParamsError("'params' must be an object: A2A methods take named params.")
        if problem := unstorable_text(params):
            raise InvalidParamsError(f"Strings in 'params' {problem}.")
        if in_batch and method in STREAMING_METHODS:
            raise InvalidRequestError(f"{method} streams its answer and cannot be batched.")
        result = await handler(call, params)
    except (AuthenticationRequired, InsufficientScope, LimitExceeded) as exc:
        if not in_batch:
            raise  # a lone request is answered HTTP 401, 403 or 429
        # In a batch the other calls already ran: their answers must not be lost to a 401, a
        # 403 or a 429; this one is answered in its place.
        return None if is_notification else jsonrpc_response(request_id, exc)
    except AnsweredIn as answered:
        if is_notification:
            return None
        return jsonrpc_response(request_id, answered.error, answered.dialect)
    except Exception as exc:
        return None if is_notification else jsonrpc_response(request_id, exc, dialect)
    if isinstance(result, SseStream):
        if is_notification:  # nobody listens: the message is sent, the stream is not opened
            await result.items.aclose()
            return None
        return StreamAnswer(request_id, result)
    if is_notification:
        return None
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _sse_response(answer: StreamAnswer) -> StreamingHttpResponse:
    request_id = answer.request_id
    return sse_response(
        answer.stream,
        wrap=lambda result: {"jsonrpc": "2.0", "id": request_id, "result": result},
        error_body=lambda error: jsonrpc_response(request_id, error),
    )


def error_response(exc: BaseException, request_id: Any = None) -> JsonResponse:
    """A request-level error in JSON-RPC's envelope: with the HTTP status the error is about
    (401, 404, 405, 413, 415, 429) and its headers, or 200 as JSON-RPC answers its own
    errors."""
    problem = problem_of(exc)
    response = JsonResponse(
        {"jsonrpc": "2.0", "id": request_id, "error": jsonrpc_error(problem)},
        status=problem.http_status if problem.http_level else 200,
    )
    for name, value in problem.headers.items():
        response[name] = value
    return response


@csrf_exempt
async def agent_jsonrpc(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    request_id = None
    try:
        if request.method != "POST":
            raise MethodNotAllowed(
                "JSON-RPC requests are POSTed to this URL; the agent card is at "
                ".well-known/agent-card.json.",
                allow=["POST"],
            )
        # The agent, and its caller or why the credentials were refused: that is answered
        # after the request's own checks below.
        identified = await http_identify(
            tenant_slug=tenant_slug,
            agent_slug=agent_slug,
            headers=request.headers,
            source=request.META.get("REMOTE_ADDR") or "",
        )
        content_type = request.content_type or ""
        if (
            content_type
            and content_type != "application/json"
            and not content_type.endswith("+json")
        ):
            raise UnsupportedMediaType(
                f"Content-Type {content_type!r} is not supported; send application/json."
            )
        try:
            raw = request.body
        except RequestDataTooBig:
            raise BodyTooLarge(
                f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
            ) from None
        try:
            body = json_loads(raw)
        except BadJson as exc:
            raise JSONParseError(str(exc)) from None
        if isinstance(body, dict) and _valid_id(body.get("id")):
            request_id = body.get("id")
        named = request.headers.get("A2A-Version") or request.GET.get("A2A-Version") or ""
        dialect = dialect_of(named)
        call = http_caller(identified, request.headers, dialect=dialect)
        versioned = bool(named.strip())
        if isinstance(body, list):
            return await _batch(call, dialect, body, versioned)
        answer = await _dispatch_one(call, dialect, body, versioned=versioned)
    except Exception as exc:
        return error_response(exc, request_id)
    if isinstance(answer, StreamAnswer):
        return _sse_response(answer)
    return JsonResponse(answer) if answer is not None else HttpResponse(status=204)


async def _batch(call: Caller, dialect: str, body: list[Any], versioned: bool) -> HttpResponse:
    if not body:
        raise InvalidRequestError("An empty batch is invalid.")
    if len(body) > settings.A2A_MAX_BATCH_REQUESTS:
        raise InvalidRequestError(
            f"A batch of {len(body)} requests exceeds this server's limit of "
            f"{settings.A2A_MAX_BATCH_REQUESTS}."
        )
    answers = [
        await _dispatch_one(call, dialect, item, in_batch=True, versioned=versioned)
        for item in body
    ]
    answers = [a for a in answers if a is not None]
    return JsonResponse(answers, safe=False) if answers else HttpResponse(status=204)
