"""The gRPC binding: `lf.a2a.v1.A2AService` (v1.0) and `a2a.v1.A2AService` (v0.3) on one port.

Thin like the HTTP adapters: build the caller (bindings.callers routes the call to an agent),
convert the request with the dialect's codec, call the same operations as JSON-RPC and REST,
convert the answer. Errors become statuses through bindings.errors. The sidecar process that
serves these is grpc_server.
"""

from __future__ import annotations

import contextlib
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
from google.protobuf import empty_pb2
from google.protobuf.json_format import MessageToDict, SerializeToJsonError
from google.protobuf.message import Message

from a2a_platform.versions import V0_3, V1_0
from push_app.operations import (
    push_config_create,
    push_config_delete,
    push_config_get,
    push_config_list,
)
from tasks_app.errors import InvalidParamsError
from tasks_app.operations import (
    Caller,
    Stream,
    extended_card_get,
    message_send,
    message_stream,
    task_cancel,
    task_get,
    task_list,
    task_subscribe,
)

from .callers import grpc_caller
from .codecs import v03, v10
from .errors import grpc_status_of
from .wire import contains_nul

R = TypeVar("R")
Context = grpc.aio.ServicerContext

V10_SERVICE = pb10.DESCRIPTOR.services_by_name["A2AService"].full_name
V03_SERVICE = pb03.DESCRIPTOR.services_by_name["A2AService"].full_name


class _Service:
    """What both services share: the caller, and errors answered as a status."""

    dialect: str
    service: str

    async def caller(
        self, context: Context, request: Message, *, tenant: str = "", task_id: str = ""
    ) -> Caller:
        try:  # what the JSON bindings could not even be sent is invalid here too
            as_json = MessageToDict(request)
        except SerializeToJsonError as exc:
            raise InvalidParamsError(f"Invalid request: {exc}") from None
        if contains_nul(as_json):  # as the HTTP bindings refuse it
            raise InvalidParamsError("Strings in the request must not contain U+0000 (NUL).")
        metadata = [
            (key.lower(), value)
            for key, value in context.invocation_metadata() or ()
            if isinstance(value, str)  # `-bin` keys carry bytes; none of ours is binary
        ]
        return await grpc_caller(
            metadata=metadata,
            speaks=self.dialect,
            service=self.service,
            tenant=tenant,
            task_id=task_id,
        )

    async def unary(self, context: Context, call: Callable[[], Awaitable[R]]) -> R:
        try:
            return await call()
        except Exception as exc:  # every error is answered as a status, never UNKNOWN
            status = grpc_status_of(exc, self.dialect)
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
            status = grpc_status_of(exc, self.dialect)
            await context.abort(status.code, status.details, status.trailing_metadata)


class A2AServiceV10(_Service, pb10_grpc.A2AServiceServicer):
    dialect = V1_0
    service = V10_SERVICE

    async def SendMessage(self, request: pb10.SendMessageRequest, context: Context) -> Any:
        async def call() -> pb10.SendMessageResponse:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.message.task_id
            )
            return v10.send_result(await message_send(caller=caller, request=request))

        return await self.unary(context, call)

    async def SendStreamingMessage(
        self, request: pb10.SendMessageRequest, context: Context
    ) -> AsyncIterator[pb10.StreamResponse]:
        async def open_stream() -> Stream:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.message.task_id
            )
            return await message_stream(caller=caller, request=request)

        async for response in self.stream(context, open_stream, lambda item: item.response):
            yield response

    async def GetTask(self, request: pb10.GetTaskRequest, context: Context) -> Any:
        async def call() -> pb10.Task:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await task_get(caller=caller, request=request)

        return await self.unary(context, call)

    async def ListTasks(self, request: pb10.ListTasksRequest, context: Context) -> Any:
        async def call() -> pb10.ListTasksResponse:
            caller = await self.caller(context, request, tenant=request.tenant)
            return await task_list(caller=caller, request=request)

        return await self.unary(context, call)

    async def CancelTask(self, request: pb10.CancelTaskRequest, context: Context) -> Any:
        async def call() -> pb10.Task:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await task_cancel(caller=caller, task_id=request.id, tenant=request.tenant)

        return await self.unary(context, call)

    async def SubscribeToTask(
        self, request: pb10.SubscribeToTaskRequest, context: Context
    ) -> AsyncIterator[pb10.StreamResponse]:
        async def open_stream() -> Stream:
            caller = await self.caller(context, request, tenant=request.tenant, task_id=request.id)
            return await task_subscribe(caller=caller, task_id=request.id, tenant=request.tenant)

        async for response in self.stream(context, open_stream, lambda item: item.response):
            yield response

    async def GetExtendedAgentCard(
        self, request: pb10.GetExtendedAgentCardRequest, context: Context
    ) -> Any:
        async def call() -> pb10.AgentCard:
            caller = await self.caller(context, request, tenant=request.tenant)
            return await extended_card_get(caller=caller)

        return await self.unary(context, call)

    async def CreateTaskPushNotificationConfig(
        self, request: pb10.TaskPushNotificationConfig, context: Context
    ) -> Any:
        async def call() -> pb10.TaskPushNotificationConfig:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await push_config_create(caller=caller, config=request)

        return await self.unary(context, call)

    async def GetTaskPushNotificationConfig(
        self, request: pb10.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb10.TaskPushNotificationConfig:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await push_config_get(
                caller=caller, task_id=request.task_id, config_id=request.id, tenant=request.tenant
            )

        return await self.unary(context, call)

    async def ListTaskPushNotificationConfigs(
        self, request: pb10.ListTaskPushNotificationConfigsRequest, context: Context
    ) -> Any:
        async def call() -> pb10.ListTaskPushNotificationConfigsResponse:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            return await push_config_list(caller=caller, request=request)

        return await self.unary(context, call)

    async def DeleteTaskPushNotificationConfig(
        self, request: pb10.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> empty_pb2.Empty:
            caller = await self.caller(
                context, request, tenant=request.tenant, task_id=request.task_id
            )
            await push_config_delete(
                caller=caller, task_id=request.task_id, config_id=request.id, tenant=request.tenant
            )
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
    service = V03_SERVICE

    @staticmethod
    def _task_id(name: str) -> str:
        return proto03.FromProto.task_id_params(pb03.CancelTaskRequest(name=name)).id

    async def SendMessage(self, request: pb03.SendMessageRequest, context: Context) -> Any:
        async def call() -> pb03.SendMessageResponse:
            core = v03.v03pb_send_request(request)
            caller = await self.caller(context, request, task_id=core.message.task_id)
            return v03.send_result(await message_send(caller=caller, request=core), "proto")

        return await self.unary(context, call)

    async def SendStreamingMessage(
        self, request: pb03.SendMessageRequest, context: Context
    ) -> AsyncIterator[pb03.StreamResponse]:
        async def open_stream() -> Stream:
            core = v03.v03pb_send_request(request)
            caller = await self.caller(context, request, task_id=core.message.task_id)
            return await message_stream(caller=caller, request=core)

        async for response in self.stream(context, open_stream, v03.stream_renderer("proto")):
            yield response

    async def GetTask(self, request: pb03.GetTaskRequest, context: Context) -> Any:
        async def call() -> pb03.Task:
            params = proto03.FromProto.task_query_params(request)
            core = v03.v03pb_get_request(params.id, params.history_length)
            caller = await self.caller(context, request, task_id=core.id)
            return v03.task_out(await task_get(caller=caller, request=core), "proto")

        return await self.unary(context, call)

    async def CancelTask(self, request: pb03.CancelTaskRequest, context: Context) -> Any:
        async def call() -> pb03.Task:
            task_id = self._task_id(request.name)
            caller = await self.caller(context, request, task_id=task_id)
            return v03.task_out(await task_cancel(caller=caller, task_id=task_id), "proto")

        return await self.unary(context, call)

    async def TaskSubscription(
        self, request: pb03.TaskSubscriptionRequest, context: Context
    ) -> AsyncIterator[pb03.StreamResponse]:
        async def open_stream() -> Stream:
            task_id = self._task_id(request.name)
            caller = await self.caller(context, request, task_id=task_id)
            return await task_subscribe(caller=caller, task_id=task_id)

        async for response in self.stream(context, open_stream, v03.stream_renderer("proto")):
            yield response

    async def GetAgentCard(self, request: pb03.GetAgentCardRequest, context: Context) -> Any:
        async def call() -> pb03.AgentCard:
            # v0.3's GetAgentCard is its authenticated (extended) card, as JSON-RPC's
            # agent/getAuthenticatedExtendedCard and REST's v1/card.
            caller = await self.caller(context, request)
            return v03.card_out(await extended_card_get(caller=caller), "proto")

        return await self.unary(context, call)

    async def CreateTaskPushNotificationConfig(
        self, request: pb03.CreateTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.TaskPushNotificationConfig:
            task_id = _v03_task_name(request.parent, "parent")
            caller = await self.caller(context, request, task_id=task_id)
            config = v03.v03pb_push_config_request(request)
            created = await push_config_create(caller=caller, config=config)
            return v03.push_config_out(created, "proto")

        return await self.unary(context, call)

    async def GetTaskPushNotificationConfig(
        self, request: pb03.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.TaskPushNotificationConfig:
            task_id, config_id = _v03_config_name(request.name, config_optional=True)
            caller = await self.caller(context, request, task_id=task_id)
            config = await push_config_get(caller=caller, task_id=task_id, config_id=config_id)
            return v03.push_config_out(config, "proto")

        return await self.unary(context, call)

    async def ListTaskPushNotificationConfig(
        self, request: pb03.ListTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> pb03.ListTaskPushNotificationConfigResponse:
            task_id = _v03_task_name(request.parent, "parent")
            caller = await self.caller(context, request, task_id=task_id)
            response = await push_config_list(
                caller=caller,
                request=pb10.ListTaskPushNotificationConfigsRequest(
                    task_id=task_id, page_size=request.page_size, page_token=request.page_token
                ),
            )
            return pb03.ListTaskPushNotificationConfigResponse(
                configs=[v03.push_config_out(c, "proto") for c in response.configs],
                next_page_token=response.next_page_token,
            )

        return await self.unary(context, call)

    async def DeleteTaskPushNotificationConfig(
        self, request: pb03.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        async def call() -> empty_pb2.Empty:
            task_id, config_id = _v03_config_name(request.name)
            caller = await self.caller(context, request, task_id=task_id)
            await push_config_delete(caller=caller, task_id=task_id, config_id=config_id)
            return empty_pb2.Empty()

        return await self.unary(context, call)
