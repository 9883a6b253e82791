"""The gRPC binding: `lf.a2a.v1.A2AService` (v1.0) and `a2a.v1.A2AService` (v0.3) on one port.

Thin like the HTTP adapters: route the call to an agent and a principal (grpc_server.routing),
convert the request with the dialect's codec, call the same tasks_app.operations as JSON-RPC and
REST, convert the answer. Errors become the spec's gRPC status with a `google.rpc.Status` that
carries an `ErrorInfo` (reason, domain `a2a-protocol.org`); v0.3 clients also read the error
class from the message (`TaskNotFoundError: ...`).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.compat.v0_3 import proto_utils as proto03
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from a2a.utils.errors import A2A_ERROR_REASONS
from google.protobuf import any_pb2, empty_pb2
from google.protobuf.json_format import MessageToDict, SerializeToJsonError
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from agents.errors import AgentNotFound, AuthenticationRequired
from tasks_app import dialects
from tasks_app.dialects import V0_3, V1_0
from tasks_app.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    VersionNotSupportedError,
    grpc_status,
)
from tasks_app.operations import (
    Caller,
    Stream,
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
from tasks_app.wire import contains_nul

from .routing import route_call

logger = logging.getLogger(__name__)

R = TypeVar("R")
Context = grpc.aio.ServicerContext

SINGLE_VALUED = ("a2a-version", "a2a-agent", "authorization", "x-api-key")
# `x-a2a-extensions` is the name v0.3-era clients send.
EXTENSION_KEYS = ("a2a-extensions", "x-a2a-extensions")

V10_SERVICE = pb10.DESCRIPTOR.services_by_name["A2AService"].full_name
V03_SERVICE = pb03.DESCRIPTOR.services_by_name["A2AService"].full_name


def _status(code: str, message: str, reason: str) -> grpc.Status:
    info = any_pb2.Any()
    info.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="a2a-protocol.org"))
    status = status_pb2.Status(code=grpc.StatusCode[code].value[0], message=message, details=[info])
    return rpc_status.to_status(status)


def _status_of(exc: Exception, dialect: str) -> grpc.Status:
    if isinstance(exc, A2AError):
        message = exc.message
        if dialect == V0_3:  # the SDK's v0.3 gRPC client reads the class from the message
            message = f"{type(exc).__name__}: {message}"
        reason = A2A_ERROR_REASONS.get(type(exc), "INTERNAL_ERROR")
        return _status(grpc_status(exc), message, reason)
    if isinstance(exc, AuthenticationRequired):
        return _status(exc.grpc_status, exc.message, exc.reason)
    if isinstance(exc, AgentNotFound):
        return _status("NOT_FOUND", exc.message, "AGENT_NOT_FOUND")
    logger.exception("Unhandled error in a gRPC call")
    return _status_of(
        InternalError("The server failed to process this call; it has been logged."), dialect
    )


class _Service:
    """What both services share: the call's route, version check and error answers."""

    dialect: str

    async def caller(
        self, context: Context, request: Message, *, tenant: str = "", task_id: str = ""
    ) -> Caller:
        try:  # what the JSON bindings could not even be sent is invalid here too
            as_json = MessageToDict(request)
        except SerializeToJsonError as exc:
            raise InvalidParamsError(f"Invalid request: {exc}") from None
        if contains_nul(as_json):  # as the HTTP bindings refuse it
            raise InvalidParamsError("Strings in the request must not contain U+0000 (NUL).")
        pairs = [
            (key.lower(), value)
            for key, value in context.invocation_metadata() or ()
            if isinstance(value, str)  # `-bin` keys carry bytes; none of ours is binary
        ]
        for key in SINGLE_VALUED:
            values = {v for k, v in pairs if k == key}
            if len(values) > 1:
                raise InvalidParamsError(
                    f"Metadata {key!r} was sent more than once with different values."
                )
        metadata = dict(pairs)
        version = metadata.get("a2a-version", "").strip()
        if version and dialects.dialect_of(version, None) != self.dialect:
            raise VersionNotSupportedError(
                f"a2a-version {version[:20]} is not what this service speaks ({self.dialect}): "
                f"{V10_SERVICE} speaks 1.0, {V03_SERVICE} speaks 0.3."
            )
        route = await route_call(metadata=metadata, tenant=tenant, task_id=task_id)
        extensions = requested_extensions(*(v for k, v in pairs if k in EXTENSION_KEYS))
        return Caller(
            agent=route.agent,
            principal=route.principal,
            extensions=extensions,
            dialect=self.dialect,
        )

    async def unary(self, context: Context, call: Callable[[], Awaitable[R]]) -> R:
        try:
            return await call()
        except Exception as exc:  # every error is answered as a status, never UNKNOWN
            status = _status_of(exc, self.dialect)
            await context.abort(status.code, status.details, status.trailing_metadata)
            raise AssertionError("unreachable: abort raises") from exc

    async def stream(
        self, context: Context, open_stream: Callable[[], Awaitable[Stream]], render: Callable
    ) -> AsyncIterator[Any]:
        try:
            async with contextlib.aclosing(await open_stream()) as items:
                async for item in items:
                    if item is None:  # a keep-alive: gRPC has its own pings
                        continue
                    rendered = render(item)  # one response, or several for one event
                    for response in rendered if isinstance(rendered, list) else [rendered]:
                        yield response
        except Exception as exc:
            status = _status_of(exc, self.dialect)
            await context.abort(status.code, status.details, status.trailing_metadata)


class A2AServiceV10(_Service, pb10_grpc.A2AServiceServicer):
    dialect = V1_0

    async def SendMessage(self, request: pb10.SendMessageRequest, context: Context) -> Any:
        async def call() -> pb10.SendMessageResponse:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.message.task_id
            )
            result = await send_message(caller, request)
            if isinstance(result, pb10.Task):
                return pb10.SendMessageResponse(task=result)
            return pb10.SendMessageResponse(message=result)

        return await self.unary(context, call)

    async def SendStreamingMessage(
        self, request: pb10.SendMessageRequest, context: Context
    ) -> AsyncIterator[pb10.StreamResponse]:
        async def open_stream() -> Stream:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.message.task_id
            )
            return await send_message_stream(caller, request)

        async for response in self.stream(context, open_stream, lambda item: item.response):
            yield response

    async def GetTask(self, request: pb10.GetTaskRequest, context: Context) -> Any:
        async def call() -> pb10.Task:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await get_task(caller, request)

        return await self.unary(context, call)

    async def ListTasks(self, request: pb10.ListTasksRequest, context: Context) -> Any:
        async def call() -> pb10.ListTasksResponse:
            return await list_tasks(
                await self.caller(context, request, tenant=request.tenant), request
            )

        return await self.unary(context, call)

    async def CancelTask(self, request: pb10.CancelTaskRequest, context: Context) -> Any:
        async def call() -> pb10.Task:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await cancel_task(caller, request.id, tenant=request.tenant)

        return await self.unary(context, call)

    async def SubscribeToTask(
        self, request: pb10.SubscribeToTaskRequest, context: Context
    ) -> AsyncIterator[pb10.StreamResponse]:
        async def open_stream() -> Stream:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await subscribe_to_task(caller, request.id, tenant=request.tenant)

        async for response in self.stream(context, open_stream, lambda item: item.response):
            yield response

    async def GetExtendedAgentCard(
        self, request: pb10.GetExtendedAgentCardRequest, context: Context
    ) -> Any:
        async def call() -> pb10.AgentCard:
            return await get_extended_card(
                await self.caller(context, request, tenant=request.tenant)
            )

        return await self.unary(context, call)

    async def CreateTaskPushNotificationConfig(
        self, request: pb10.TaskPushNotificationConfig, context: Context
    ) -> Any:
        async def call() -> pb10.TaskPushNotificationConfig:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await create_push_config(caller, request)

        return await self.unary(context, call)

    async def GetTaskPushNotificationConfig(
        self, request: pb10.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb10.TaskPushNotificationConfig:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await get_push_config(caller, request.task_id, request.id, tenant=request.tenant)

        return await self.unary(context, call)

    async def ListTaskPushNotificationConfigs(
        self, request: pb10.ListTaskPushNotificationConfigsRequest, context: Context
    ) -> Any:
        async def call() -> pb10.ListTaskPushNotificationConfigsResponse:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await list_push_configs(caller, request)

        return await self.unary(context, call)

    async def DeleteTaskPushNotificationConfig(
        self, request: pb10.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> empty_pb2.Empty:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            await delete_push_config(caller, request.task_id, request.id, tenant=request.tenant)
            return empty_pb2.Empty()

        return await self.unary(context, call)


# v0.3 resource names of push configs: a task (`tasks/{id}`) and one config of it.
_V03_TASK_NAME = re.compile(r"tasks/([^/]+)")
_V03_PUSH_CONFIG_NAME = re.compile(r"tasks/([^/]+)/pushNotificationConfigs/([^/]+)")


def _v03_task_name(name: str, field: str) -> str:
    """The task id of a `tasks/{id}` resource name."""
    match = _V03_TASK_NAME.fullmatch(name)
    if match is None:
        raise InvalidParamsError(f"'{field}' {name[:200]!r} is not a task: use 'tasks/{{id}}'.")
    return match.group(1)


def _v03_config_name(name: str, *, config_optional: bool = False) -> tuple[str, str]:
    """The task and config ids of a `tasks/{id}/pushNotificationConfigs/{configId}` name;
    `config_optional`: a bare `tasks/{id}` names the task's first config (v0.3 get)."""
    match = _V03_PUSH_CONFIG_NAME.fullmatch(name)
    if match is not None:
        return match.group(1), match.group(2)
    if config_optional and (task := _V03_TASK_NAME.fullmatch(name)) is not None:
        return task.group(1), ""
    raise InvalidParamsError(
        f"'name' {name[:200]!r} is not a push notification config: use "
        "'tasks/{id}/pushNotificationConfigs/{configId}'."
    )


class A2AServiceV03(_Service, pb03_grpc.A2AServiceServicer):
    """v0.3: requests carry no tenant (the agent comes from `a2a-agent` metadata, the task, or
    the default agent); resources are named `tasks/{id}`."""

    dialect = V0_3

    @staticmethod
    def _task_id(name: str) -> str:
        return proto03.FromProto.task_id_params(pb03.CancelTaskRequest(name=name)).id

    async def SendMessage(self, request: pb03.SendMessageRequest, context: Context) -> Any:
        async def call() -> pb03.SendMessageResponse:
            core = dialects.v03pb_send_request(request)
            result = await send_message(
                await self.caller(context, request, task_id=core.message.task_id), core
            )
            return dialects.v03pb_send_result(result)

        return await self.unary(context, call)

    async def SendStreamingMessage(
        self, request: pb03.SendMessageRequest, context: Context
    ) -> AsyncIterator[pb03.StreamResponse]:
        async def open_stream() -> Stream:
            core = dialects.v03pb_send_request(request)
            caller = await self.caller(context, request, task_id=core.message.task_id)
            return await send_message_stream(caller, core)

        async for response in self.stream(context, open_stream, _v03_renderer()):
            yield response

    async def GetTask(self, request: pb03.GetTaskRequest, context: Context) -> Any:
        async def call() -> pb03.Task:
            params = proto03.FromProto.task_query_params(request)
            core = dialects.v03pb_get_request(params.id, params.history_length)
            task = await get_task(await self.caller(context, request, task_id=core.id), core)
            return dialects.v03pb_task(task)

        return await self.unary(context, call)

    async def CancelTask(self, request: pb03.CancelTaskRequest, context: Context) -> Any:
        async def call() -> pb03.Task:
            task_id = self._task_id(request.name)
            task = await cancel_task(await self.caller(context, request, task_id=task_id), task_id)
            return dialects.v03pb_task(task)

        return await self.unary(context, call)

    async def TaskSubscription(
        self, request: pb03.TaskSubscriptionRequest, context: Context
    ) -> AsyncIterator[pb03.StreamResponse]:
        async def open_stream() -> Stream:
            task_id = self._task_id(request.name)
            return await subscribe_to_task(
                await self.caller(context, request, task_id=task_id), task_id
            )

        async for response in self.stream(context, open_stream, _v03_renderer()):
            yield response

    async def GetAgentCard(self, request: pb03.GetAgentCardRequest, context: Context) -> Any:
        async def call() -> pb03.AgentCard:
            # v0.3's GetAgentCard is its authenticated (extended) card, as JSON-RPC's
            # agent/getAuthenticatedExtendedCard and REST's v1/card.
            return dialects.v03pb_card(await get_extended_card(await self.caller(context, request)))

        return await self.unary(context, call)

    async def CreateTaskPushNotificationConfig(
        self, request: pb03.CreateTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.TaskPushNotificationConfig:
            task_id = _v03_task_name(request.parent, "parent")
            caller = await self.caller(context, request, task_id=task_id)
            config = dialects.v03pb_push_config_request(request)
            created = await create_push_config(caller, config)
            return dialects.v03pb_push_config(created)

        return await self.unary(context, call)

    async def GetTaskPushNotificationConfig(
        self, request: pb03.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.TaskPushNotificationConfig:
            task_id, config_id = _v03_config_name(request.name, config_optional=True)
            caller = await self.caller(context, request, task_id=task_id)
            return dialects.v03pb_push_config(await get_push_config(caller, task_id, config_id))

        return await self.unary(context, call)

    async def ListTaskPushNotificationConfig(
        self, request: pb03.ListTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.ListTaskPushNotificationConfigResponse:
            task_id = _v03_task_name(request.parent, "parent")
            caller = await self.caller(context, request, task_id=task_id)
            response = await list_push_configs(
                caller,
                pb10.ListTaskPushNotificationConfigsRequest(
                    task_id=task_id, page_size=request.page_size, page_token=request.page_token
                ),
            )
            return pb03.ListTaskPushNotificationConfigResponse(
                configs=[dialects.v03pb_push_config(c) for c in response.configs],
                next_page_token=response.next_page_token,
            )

        return await self.unary(context, call)

    async def DeleteTaskPushNotificationConfig(
        self, request: pb03.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> empty_pb2.Empty:
            task_id, config_id = _v03_config_name(request.name)
            caller = await self.caller(context, request, task_id=task_id)
            await delete_push_config(caller, task_id, config_id)
            return empty_pb2.Empty()

        return await self.unary(context, call)


def _v03_renderer() -> Callable[[Any], list[pb03.StreamResponse]]:
    events = dialects.V03StreamEvents()  # one per stream: see there how a v0.3 stream ends

    def render(item: Any) -> list[pb03.StreamResponse]:
        return [proto03.ToProto.stream_response(e) for e in events(item.response, final=item.final)]

    return render
