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
from asgiref.sync import ThreadSensitiveContext
from channels.db import database_sync_to_async
from google.protobuf import any_pb2
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
    PushNotificationNotSupportedError,
    VersionNotSupportedError,
    grpc_status,
)
from tasks_app.operations import (
    Caller,
    Stream,
    cancel_task,
    get_extended_card,
    get_task,
    list_tasks,
    requested_extensions,
    send_message,
    send_message_stream,
    subscribe_to_task,
)
from tasks_app.selectors import task_get_row
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
        route = await database_sync_to_async(route_call)(
            metadata=metadata, tenant=tenant, task_id=task_id
        )
        extensions = requested_extensions(*(v for k, v in pairs if k in EXTENSION_KEYS))
        return Caller(agent=route.agent, principal=route.principal, extensions=extensions)

    async def unary(self, context: Context, call: Callable[[], Awaitable[R]]) -> R:
        try:
            # Each call gets its own thread for its database work, as Django gives each HTTP
            # request; without this every call in the process queues on one shared thread.
            async with ThreadSensitiveContext():
                return await call()
        except Exception as exc:  # every error is answered as a status, never UNKNOWN
            status = _status_of(exc, self.dialect)
            await context.abort(status.code, status.details, status.trailing_metadata)
            raise AssertionError("unreachable: abort raises") from exc

    async def stream(
        self, context: Context, open_stream: Callable[[], Awaitable[Stream]], render: Callable
    ) -> AsyncIterator[Any]:
        try:
            async with ThreadSensitiveContext():
                async with contextlib.aclosing(await open_stream()) as items:
                    async for item in items:
                        if item is not None:  # None is a keep-alive: gRPC has its own pings
                            yield render(item)
        except Exception as exc:
            status = _status_of(exc, self.dialect)
            await context.abort(status.code, status.details, status.trailing_metadata)

    @staticmethod
    async def check_task(caller: Caller, task_id: str) -> None:
        """The task is the caller's (TaskNotFound otherwise), before anything is said about it."""
        if task_id:
            await database_sync_to_async(task_get_row)(
                agent=caller.agent, principal=caller.principal, task_id=task_id
            )

    def push_unsupported(self) -> PushNotificationNotSupportedError:
        return PushNotificationNotSupportedError(
            "This agent does not offer push notifications "
            "(its card declares capabilities.pushNotifications=false)."
        )


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

    async def _refuse_push(self, request: Any, context: Context) -> Any:
        async def call() -> Any:
            task_id = getattr(request, "task_id", "")
            caller = await self.caller(context, request, tenant=request.tenant, task_id=task_id)
            await self.check_task(caller, task_id)
            raise self.push_unsupported()

        return await self.unary(context, call)

    CreateTaskPushNotificationConfig = _refuse_push
    GetTaskPushNotificationConfig = _refuse_push
    ListTaskPushNotificationConfigs = _refuse_push
    DeleteTaskPushNotificationConfig = _refuse_push


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

        async for response in self.stream(context, open_stream, _v03_event):
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

        async for response in self.stream(context, open_stream, _v03_event):
            yield response

    async def GetAgentCard(self, request: pb03.GetAgentCardRequest, context: Context) -> Any:
        async def call() -> pb03.AgentCard:
            # v0.3's GetAgentCard is its authenticated (extended) card, as JSON-RPC's
            # agent/getAuthenticatedExtendedCard and REST's v1/card.
            return dialects.v03pb_card(await get_extended_card(await self.caller(context, request)))

        return await self.unary(context, call)

    async def _refuse_push(self, request: Any, context: Context) -> Any:
        async def call() -> Any:
            # Resource names: `tasks/{id}` (parent) or `tasks/{id}/pushNotificationConfigs/...`.
            name = getattr(request, "parent", "") or getattr(request, "name", "")
            task_id = name.split("/")[1] if name.startswith("tasks/") else ""
            caller = await self.caller(context, request, task_id=task_id)
            await self.check_task(caller, task_id)
            raise self.push_unsupported()

        return await self.unary(context, call)

    CreateTaskPushNotificationConfig = _refuse_push
    GetTaskPushNotificationConfig = _refuse_push
    ListTaskPushNotificationConfig = _refuse_push
    DeleteTaskPushNotificationConfig = _refuse_push


def _v03_event(item: Any) -> pb03.StreamResponse:
    return dialects.v03pb_event(item.response, final=item.final)
