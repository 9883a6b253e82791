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
from agents.errors import AuthenticationRequired
from push_app.operations import (
    push_config_create,
    push_config_delete,
    push_config_get,
    push_config_get_v01,
    push_config_list,
)
from tasks_app.errors import (
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    TaskNotFoundError,
)
from tasks_app.operations import (
    Caller,
    extended_card_get,
    message_send,
    message_stream,
    task_cancel,
    task_get,
    task_list,
    task_subscribe,
)
from tasks_app.selectors import task_artifact_ids

from .callers import dialect_of, http_caller, http_identify
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
from .wire import BadJson, contains_nul, json_loads

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


async def v03_push_get(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/get"
    request = v03.v03_request(v03types.GetTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_get_task_push_notification_config_request(request)
    config = await push_config_get(caller=call, task_id=core.task_id, config_id=core.id)
    return v03.push_config_out(config, "json")


async def v03_push_list(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/list"
    request = v03.v03_request(v03types.ListTaskPushNotificationConfigRequest, method, params)
    core = conversions.to_core_list_task_push_notification_config_request(request)
    response = await push_config_list(caller=call, request=core)
    return [v03.push_config_out(config, "json") for config in response.configs]


async def v03_push_delete(call: Caller, params: dict[str, Any]) -> Any:
    method = "tasks/pushNotificationConfig/delete"
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
    """The caller, carrying an inline push config's headers to the send."""
    headers = v01.v01_push_headers(params)
    return dataclasses.replace(call, push_headers=headers) if headers else call


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
    result = await message_send(caller=call, request=request, new_task_id=new_task_id)
    if isinstance(result, TaskProto):
        return v01.v01_task_json(result)
    # The agent answered with a Message; its task holds it, and v0.1 answers with the task.
    task_request = GetTaskRequest(id=task_pk)
    if request.configuration.HasField("history_length"):
        task_request.history_length = request.configuration.history_length
    return v01.v01_task_json(await task_get(caller=call, request=task_request), reply=result)


async def v01_send_subscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    request, task_id = v01.v01_send_request(params)
    call = _v01_caller(call, params)
    request, new_task_id = await _v01_continue_or_create(call, request, task_id)
    stream = await message_stream(caller=call, request=request, new_task_id=new_task_id)
    return SseStream(stream, v01.stream_renderer())


async def v01_get(call: Caller, params: dict[str, Any]) -> Any:
    return v01.v01_task_json(await task_get(caller=call, request=v01.v01_get_request(params)))


async def v01_cancel(call: Caller, params: dict[str, Any]) -> Any:
    return v01.v01_task_json(await task_cancel(caller=call, task_id=v01.v01_task_id(params)))


async def v01_resubscribe(call: Caller, params: dict[str, Any]) -> SseStream:
    task_id = v01.v01_task_id(params)
    stream = await task_subscribe(caller=call, task_id=task_id, last_event_id=call.last_event_id)
    # A replay sends no snapshot, so v0.1's artifact numbers continue from the task's own.
    return SseStream(stream, v01.stream_renderer(await db(task_artifact_ids)(task_id=task_id)))


async def v01_get_card(call: Caller, params: dict[str, Any]) -> Any:
    return v01.v01_card_json(await db(agent_card_build)(call.agent))


async def v01_push_set(call: Caller, params: dict[str, Any]) -> Any:
    config, headers = v01.v01_push_set_request(params)
    await push_config_create(caller=call, config=config, headers=headers)
    return {"url": config.url, "headers": headers}


async def v01_push_get(call: Caller, params: dict[str, Any]) -> Any:
    return await push_config_get_v01(caller=call, task_id=v01.v01_push_get_task_id(params))


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


def _effective_dialect(dialect: str, method: str) -> str:
    return V0_1 if dialect == V0_3 and method in V01_ONLY_METHODS else dialect


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
    call: Caller, dialect: str, body: Any, *, in_batch: bool = False
) -> dict[str, Any] | StreamAnswer | None:
    """Answer one request object; None for a notification."""
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
    except AuthenticationRequired as exc:
        if not in_batch:
            raise  # a lone request is answered HTTP 401
        # In a batch the other calls already ran: their answers must not be lost to a 401.
        return None if is_notification else jsonrpc_response(request_id, exc)
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
    (401, 404, 405, 413, 415), or 200 as JSON-RPC answers its own errors."""
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
            tenant_slug=tenant_slug, agent_slug=agent_slug, headers=request.headers
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
        dialect = dialect_of(request.headers.get("A2A-Version"), request.GET.get("A2A-Version"))
        call = http_caller(identified, request.headers, dialect=dialect)
        if isinstance(body, list):
            return await _batch(call, dialect, body)
        answer = await _dispatch_one(call, dialect, body)
    except Exception as exc:
        return error_response(exc, request_id)
    if isinstance(answer, StreamAnswer):
        return _sse_response(answer)
    return JsonResponse(answer) if answer is not None else HttpResponse(status=204)


async def _batch(call: Caller, dialect: str, body: list[Any]) -> HttpResponse:
    if not body:
        raise InvalidRequestError("An empty batch is invalid.")
    if len(body) > settings.A2A_MAX_BATCH_REQUESTS:
        raise InvalidRequestError(
            f"A batch of {len(body)} requests exceeds this server's limit of "
            f"{settings.A2A_MAX_BATCH_REQUESTS}."
        )
    answers = [await _dispatch_one(call, dialect, item, in_batch=True) for item in body]
    answers = [a for a in answers if a is not None]
    return JsonResponse(answers, safe=False) if answers else HttpResponse(status=204)
