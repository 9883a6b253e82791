"""The JSON-RPC 2.0 binding: one POST endpoint per agent, v1.0 and v0.3 dialects.

Adapters stay thin: parse with the dialect codec, call one service, serialize. The envelope
(batches, notifications, ids) follows JSON-RPC 2.0; errors carry the A2A spec's codes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.types import Task as TaskProto
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from google.protobuf.json_format import MessageToDict

from a2a_platform.db import db
from agents.auth import caller_resolve, credentials_from_headers
from agents.errors import AgentNotFound, AuthenticationRequired

from . import dialect_v01, dialects
from .dialects import V0_1, V0_3, V1_0, conversions, v03
from .errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    jsonrpc_error,
)
from .operations import (
    Caller,
    cancel_task,
    create_push_config,
    delete_push_config,
    get_extended_card,
    get_push_config,
    get_task,
    list_push_configs,
    list_tasks,
    requested_extensions,
    send_message,
    send_message_stream,
    subscribe_to_task,
)
from .selectors import task_artifact_ids
from .sse import SseStream, sse_response
from .streams import StreamItem
from .wire import BadJson, contains_nul, json_loads

logger = logging.getLogger(__name__)


Handler = Callable[[Caller, dict[str, Any]], Awaitable[Any]]


# --- v1.0 -----------------------------------------------------------------------------


def _dict(message: Any) -> dict[str, Any]:
    return MessageToDict(message)


async def v10_send(call: Caller, params: dict[str, Any]) -> Any:
    result = await send_message(call, dialects.v10_params(params, SendMessageRequest))
    if isinstance(result, TaskProto):
        return _dict(SendMessageResponse(task=result))
    return _dict(SendMessageResponse(message=result))


async def v10_get(call: Caller, params: dict[str, Any]) -> Any:
    return await get_task(call, dialects.v10_params(params, GetTaskRequest), as_json=True)


async def v10_list(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v10_params(params, ListTasksRequest)
    return dialects.v10_list_result(request, await list_tasks(call, request))


async def v10_cancel(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v10_params(params, CancelTaskRequest)
    return _dict(await cancel_task(call, request.id, tenant=request.tenant))


async def v10_extended_card(call: Caller, params: dict[str, Any]) -> Any:
    return _dict(await get_extended_card(call))


async def v10_send_streaming(call: Caller, params: dict[str, Any]) -> SseStream:
    request = dialects.v10_params(params, SendMessageRequest)
    return SseStream(await send_message_stream(call, request), _v10_event)


async def v10_subscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request = dialects.v10_params(params, SubscribeToTaskRequest)
    stream = await subscribe_to_task(call, request.id, call.last_event_id, tenant=request.tenant)
    return SseStream(stream, _v10_event)


async def v10_push_create(call: Caller, params: dict[str, Any]) -> Any:
    config = dialects.v10_params(params, TaskPushNotificationConfig)
    return _dict(await create_push_config(call, config))


async def v10_push_get(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v10_params(params, GetTaskPushNotificationConfigRequest)
    return _dict(await get_push_config(call, request.task_id, request.id, tenant=request.tenant))


async def v10_push_list(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v10_params(params, ListTaskPushNotificationConfigsRequest)
    return _dict(await list_push_configs(call, request))


async def v10_push_delete(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v10_params(params, DeleteTaskPushNotificationConfigRequest)
    await delete_push_config(call, request.task_id, request.id, tenant=request.tenant)
    return {}


def _v10_event(item: StreamItem) -> Any:
    return _dict(item.response)


# --- v0.3 -----------------------------------------------------------------------------


async def v03_send(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v03_request(v03.SendMessageRequest, "message/send", params)
    result = await send_message(
        call,
        dialects.v03_convert("message/send", conversions.to_core_send_message_request, request),
    )
    if isinstance(result, TaskProto):
        return dialects.v03_dump(conversions.to_compat_task(result))
    return dialects.v03_dump(conversions.to_compat_message(result))


async def v03_get(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v03_request(v03.GetTaskRequest, "tasks/get", params)
    task = await get_task(
        call, dialects.v03_convert("tasks/get", conversions.to_core_get_task_request, request)
    )
    return dialects.v03_dump(conversions.to_compat_task(task))


async def v03_list(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v03_convert("tasks/list", dialects.v03_list_request, params)
    response = await list_tasks(call, request)
    tasks = [dialects.v03_dump(conversions.to_compat_task(t)) for t in response.tasks]
    if not request.include_artifacts:
        for task in tasks:
            task.pop("artifacts", None)
    return {
        "tasks": tasks,
        "totalSize": response.total_size,
        "pageSize": response.page_size,
        "nextPageToken": response.next_page_token,
    }


async def v03_cancel(call: Caller, params: dict[str, Any]) -> Any:
    request = dialects.v03_request(v03.CancelTaskRequest, "tasks/cancel", params)
    return dialects.v03_dump(conversions.to_compat_task(await cancel_task(call, request.params.id)))


async def v03_extended_card(call: Caller, params: dict[str, Any]) -> Any:
    return dialects.v03_dump(conversions.to_compat_agent_card(await get_extended_card(call)))


async def v03_stream(call: Caller, params: dict[str, Any]) -> SseStream:
    request = dialects.v03_request(v03.SendStreamingMessageRequest, "message/stream", params)
    core = dialects.v03_convert("message/stream", conversions.to_core_send_message_request, request)
    return SseStream(await send_message_stream(call, core), _v03_renderer())


async def v03_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request = dialects.v03_request(v03.TaskResubscriptionRequest, "tasks/resubscribe", params)
    return SseStream(
        await subscribe_to_task(call, request.params.id, call.last_event_id), _v03_renderer()
    )


async def v03_push_set(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/set"
    request = dialects.v03_request(v03.SetTaskPushNotificationConfigRequest, method, params)
    core = dialects.v03_convert(
        method, conversions.to_core_create_task_push_notification_config_request, request
    )
    config = await create_push_config(call, core)
    return dialects.v03_dump(conversions.to_compat_task_push_notification_config(config))


async def v03_push_get(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/get"
    request = dialects.v03_request(v03.GetTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_get_task_push_notification_config_request(request)
    config = await get_push_config(call, core.task_id, core.id)
    return dialects.v03_dump(conversions.to_compat_task_push_notification_config(config))


async def v03_push_list(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/list"
    request = dialects.v03_request(v03.ListTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_list_task_push_notification_config_request(request)
    response = await list_push_configs(call, core)
    return [
        dialects.v03_dump(conversions.to_compat_task_push_notification_config(c))
        for c in response.configs
    ]


async def v03_push_delete(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/delete"
    request = dialects.v03_request(v03.DeleteTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_delete_task_push_notification_config_request(request)
    await delete_push_config(call, core.task_id, core.id)
    return None


def _v03_renderer() -> Callable[[StreamItem], Any]:
    events = dialects.V03StreamEvents()  # one per stream: it remembers what went out

    def render(item: StreamItem) -> Any:
        return [dialects.v03_dump(e) for e in events(item.response, final=item.final)]

    return render


# --- v0.1 (the non-streaming methods live in dialect_v01) -------------------------------


async def v01_send_subscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request, task_id = dialect_v01.v01_send_request(params)
    call = dialect_v01.v01_call_with_push_headers(call, params)
    request, new_task_id = await dialect_v01.v01_continue_or_create(call, request, task_id)
    return SseStream(
        await send_message_stream(call, request, new_task_id=new_task_id), _v01_renderer()
    )


async def v01_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    task_id = dialect_v01.v01_task_id(params)
    stream = await subscribe_to_task(call, task_id, call.last_event_id)
    # A replay sends no snapshot, so v0.1's artifact numbers continue from the task's own.
    known = await db(task_artifact_ids)(task_id=task_id)
    return SseStream(stream, _v01_renderer(known))


def _v01_renderer(known_artifacts: list[str] | None = None) -> Callable[[StreamItem], Any]:
    # v0.1 numbers artifacts; one numbering per stream, in the task's artifact order.
    indexes = {artifact_id: n for n, artifact_id in enumerate(known_artifacts or [])}

    def render(item: StreamItem) -> Any:
        # A v0.1 status update cannot carry a snapshot's artifacts: they go as events of
        # their own, each a frame with the same `id:`.
        return dialect_v01.v01_stream_events(
            item.response, final=item.final, task_id=str(item.task_id), artifact_indexes=indexes
        )

    return render


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
        "agent/getAuthenticatedExtendedCard": v03_extended_card,
        "message/stream": v03_stream,
        "tasks/resubscribe": v03_resubscribe,
        "tasks/pushNotificationConfig/set": v03_push_set,
        "tasks/pushNotificationConfig/get": v03_push_get,
        "tasks/pushNotificationConfig/list": v03_push_list,
        "tasks/pushNotificationConfig/delete": v03_push_delete,
    },
    V0_1: {
        **dialect_v01.V01_METHODS,
        "tasks/sendSubscribe": v01_send_subscribe,
        "tasks/resubscribe": v01_resubscribe,
    },
}


# --- the JSON-RPC 2.0 envelope ----------------------------------------------------------


def _error(request_id: Any, error: A2AError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": jsonrpc_error(error)}


# Methods only v0.1 has: a request without a version that uses one speaks v0.1.
V01_ONLY_METHODS = frozenset(METHODS[V0_1]) - frozenset(METHODS[V0_3])


def _effective_dialect(dialect: str, method: str) -> str:
    return V0_1 if dialect == V0_3 and method in V01_ONLY_METHODS else dialect


# v0.1 defines only -32001 (task not found) and -32003 (push) of its own, and uses -32002 for
# "session not found": A2A errors it lacks are reported as a server error (-32000).
_V01_CODES = frozenset({-32700, -32600, -32601, -32602, -32603, -32001, -32003})


def _error_in(dialect: str, request_id: Any, error: A2AError) -> dict[str, Any]:
    answer = _error(request_id, error)
    if dialect == V0_1 and answer["error"]["code"] not in _V01_CODES:
        answer["error"]["code"] = -32000
    return answer


def _method_not_found(dialect: str, method: str) -> A2AError:
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


async def _dispatch_one(
    call: Caller, dialect: str, body: Any, *, in_batch: bool = False
) -> dict[str, Any] | StreamAnswer | None:
    """Answer one request object; None for a notification."""
    if not isinstance(body, dict):
        return _error(None, InvalidRequestError("Each request must be a JSON object."))
    request_id = body.get("id")
    is_notification = "id" not in body
    if not _valid_id(request_id):
        return _error(None, InvalidRequestError("'id' must be a string, an integer or null."))
    if body.get("jsonrpc") != "2.0":
        return _error(request_id, InvalidRequestError("'jsonrpc' must be exactly \"2.0\"."))
    method = body.get("method")
    if not isinstance(method, str) or not method:
        return _error(request_id, InvalidRequestError("'method' must be a non-empty string."))
    params = body.get("params", {})
    try:
        dialect = _effective_dialect(dialect, method)
        if call.dialect != dialect:  # a v0.1-only method sent without a version header
            call = dataclasses.replace(call, dialect=dialect)
        handler = METHODS[dialect].get(method)
        if handler is None:
            raise _method_not_found(dialect, method)
        if not isinstance(params, dict):
            raise InvalidParamsError("'params' must be an object: A2A methods take named params.")
        if contains_nul(params):
            raise InvalidParamsError("Strings in 'params' must not contain U+0000 (NUL).")
        if in_batch and method in STREAMING_METHODS:
            raise InvalidRequestError(f"{method} streams its answer and cannot be batched.")
        result = await handler(call, params)
    except A2AError as exc:
        return None if is_notification else _error_in(dialect, request_id, exc)
    except AuthenticationRequired as exc:
        if not in_batch:
            raise  # a lone request is answered HTTP 401
        # In a batch the other calls already ran: their answers must not be lost to a 401.
        return (
            None
            if is_notification
            else {"jsonrpc": "2.0", "id": request_id, "error": _unauthenticated_error(exc.message)}
        )
    except Exception:
        logger.exception("Unhandled error in %s", method)
        error = InternalError("The server failed to process this request; it has been logged.")
        return None if is_notification else _error(request_id, error)
    if isinstance(result, SseStream):
        if is_notification:  # nobody listens: the message is sent, the stream is not opened
            await result.items.aclose()
            return None
        return StreamAnswer(request_id, result)
    if is_notification:
        return None
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


@dataclass(frozen=True)
class StreamAnswer:
    request_id: Any
    stream: SseStream


def _sse_response(answer: StreamAnswer) -> StreamingHttpResponse:
    request_id = answer.request_id
    return sse_response(
        answer.stream,
        wrap=lambda result: {"jsonrpc": "2.0", "id": request_id, "result": result},
        error_body=lambda error: _error(request_id, error),
    )


def _error_info(reason: str) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": "a2a-protocol.org",
    }


def _unauthenticated_error(message: str) -> dict[str, Any]:
    return {
        "code": AuthenticationRequired.jsonrpc_code,
        "message": message,
        "data": [_error_info(AuthenticationRequired.reason)],
    }


def _unauthorized(message: str, request_id: Any = None) -> JsonResponse:
    response = JsonResponse(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": _unauthenticated_error(message),
        },
        status=401,
    )
    response["WWW-Authenticate"] = 'Bearer realm="a2a", charset="UTF-8"'
    return response


def _jsonrpc_error_response(
    error: A2AError, request_id: Any = None, status: int = 200
) -> JsonResponse:
    return JsonResponse(_error(request_id, error), status=status)


@csrf_exempt
async def agent_jsonrpc(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    if request.method != "POST":
        response = _jsonrpc_error_response(
            InvalidRequestError(
                "JSON-RPC requests are POSTed to this URL; the agent card is at "
                ".well-known/agent-card.json."
            ),
            status=405,
        )
        response["Allow"] = "POST"
        return response
    # The agent and its caller, from this process's cache when fresh (agents.cache). A refused
    # caller is answered after the request's own checks below, as it always was.
    refused: AuthenticationRequired | None = None
    try:
        raw_key = credentials_from_headers({k.lower(): v for k, v in request.headers.items()})
    except AuthenticationRequired as exc:
        raw_key, refused = None, exc
    try:
        agent, principal = await caller_resolve(
            tenant_slug=tenant_slug, agent_slug=agent_slug, raw_key=raw_key
        )
    except AgentNotFound as exc:
        return JsonResponse({"error": "agent_not_found", "message": exc.message}, status=404)
    except AuthenticationRequired as exc:
        refused = refused or exc

    content_type = request.content_type or ""
    if content_type and content_type != "application/json" and not content_type.endswith("+json"):
        return _jsonrpc_error_response(
            ContentTypeNotSupportedError(
                f"Content-Type {content_type!r} is not supported; send application/json."
            ),
            status=415,
        )
    try:
        raw = request.body
    except RequestDataTooBig:
        return _jsonrpc_error_response(
            InvalidRequestError(
                f"The request body exceeds {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
            ),
            status=413,
        )
    try:
        body = json_loads(raw)
    except BadJson as exc:
        return _jsonrpc_error_response(JSONParseError(str(exc)))

    single_id = body.get("id") if isinstance(body, dict) and _valid_id(body.get("id")) else None
    try:
        dialect = dialects.dialect_of(
            request.headers.get("A2A-Version"), request.GET.get("A2A-Version")
        )
    except A2AError as exc:
        return _jsonrpc_error_response(exc, single_id)
    if refused is not None:
        return _unauthorized(refused.message, single_id)
    call = Caller(
        agent=agent,
        principal=principal,
        last_event_id=request.headers.get("Last-Event-ID"),
        extensions=requested_extensions(request.headers.get("A2A-Extensions")),
        dialect=dialect,
    )

    try:
        if isinstance(body, list):
            if not body:
                return _jsonrpc_error_response(InvalidRequestError("An empty batch is invalid."))
            if len(body) > settings.A2A_MAX_BATCH_REQUESTS:
                return _jsonrpc_error_response(
                    InvalidRequestError(
                        f"A batch of {len(body)} requests exceeds this server's limit of "
                        f"{settings.A2A_MAX_BATCH_REQUESTS}."
                    )
                )
            answers = [await _dispatch_one(call, dialect, item, in_batch=True) for item in body]
            answers = [a for a in answers if a is not None]
            return JsonResponse(answers, safe=False) if answers else HttpResponse(status=204)
        answer = await _dispatch_one(call, dialect, body)
    except AuthenticationRequired as exc:
        return _unauthorized(exc.message, single_id)
    if isinstance(answer, StreamAnswer):
        return _sse_response(answer)
    return JsonResponse(answer) if answer is not None else HttpResponse(status=204)
