"""The gRPC binding: `lf.a2a.v1.A2AService` (v1.0) and `a2a.v1.A2AService` (v0.3) on one port,
the latter also as `a2a.A2AService` (the transport mapping table's name).

Thin like the HTTP adapters: build the caller (bindings.callers routes the call to an agent),
convert the request with the dialect's codec, call the same operations as JSON-RPC and REST,
convert the answer. Errors become statuses through bindings.errors. The sidecar process that
serves these is grpc_server.

The v0.3 service answers every method name an A2A document gives it: the v0.3 proto's (the
SDK's generated servicer), and the v1 draft's and the method tables' (`compat_handlers`, with
our messages from bindings/protos); docs/decisions.md lists each name and its shapes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, TypeVar

import grpc
import grpc.aio
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.compat.v0_3 import proto_utils as proto03
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from google.protobuf import empty_pb2, message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.json_format import MessageToDict, SerializeToJsonError
from google.protobuf.message import DecodeError, Message

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
from .protos import messages_pb2 as pbx
from .protos import service_pb2
from .wire import unstorable_text

R = TypeVar("R")
Context = grpc.aio.ServicerContext

V10_SERVICE = pb10.DESCRIPTOR.services_by_name["A2AService"].full_name
V03_SERVICE = pb03.DESCRIPTOR.services_by_name["A2AService"].full_name
# Every method name any document gives the v0.3-era service, with the shapes we serve it in.
COMPAT_SERVICE_DESCRIPTOR = service_pb2.DESCRIPTOR.services_by_name["A2AService"]
COMPAT_SERVICE = COMPAT_SERVICE_DESCRIPTOR.full_name  # a2a.A2AService


class _Service:
    """What both services share: the caller, and errors answered as a status. `bound`: the
    agent (`(tenant, agent)` slugs) whose own port of the sidecar serves this instance, if any
    (A2A_GRPC_AGENT_PORTS); every call to it is that agent's."""

    dialect: str
    service: str
    bound: tuple[str, str] | None = None

    async def caller(
        self, context: Context, request: Message, *, tenant: str = "", task_id: str = ""
    ) -> Caller:
        try:  # what the JSON bindings could not even be sent is invalid here too
            as_json = MessageToDict(request)
        except SerializeToJsonError as exc:
            raise InvalidParamsError(f"Invalid request: {exc}") from None
        if problem := unstorable_text(as_json):  # as the HTTP bindings refuse it
            raise InvalidParamsError(f"Strings in the request {problem}.")
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
            bound=self.bound,
            source=context.peer() or "",
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

    def __init__(self, *, bound: tuple[str, str] | None = None) -> None:
        self.bound = bound

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

    def __init__(self, service: str = V03_SERVICE, *, bound: tuple[str, str] | None = None) -> None:
        self.service = service  # the name the call came in under, for errors that name it
        self.bound = bound

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
        return await self.unary(context, lambda: self._push_config_create(context, request))

    async def _push_config_create(
        self, context: Context, request: pb03.CreateTaskPushNotificationConfigRequest
    ) -> pb03.TaskPushNotificationConfig:
        task_id = _v03_task_name(request.parent, "parent")
        caller = await self.caller(context, request, task_id=task_id)
        config = v03.v03pb_push_config_request(request)
        created = await push_config_create(caller=caller, config=config)
        return v03.push_config_out(created, "proto")

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

    # --- the names the v1 draft and the method tables give this service ------------------
    # Same operations, same v0.3 dialect; where a document's message has the v0.3 proto's
    # fields, the v0.3 message reads it (see docs/decisions.md).

    async def ListTasks(self, request: pbx.ListTasksRequest, context: Context) -> Any:
        """The draft's ListTasks; the method tables' ListTask is the same call, and the
        mapping table's payload `{}` its empty form: the first page, bounded as every page is
        (tasks_app.selectors.task_list; docs/lists.md)."""

        async def call() -> pbx.ListTasksResponse:
            core = _list_request(request)
            caller = await self.caller(context, request)
            response = await task_list(caller=caller, request=core, size_of=_v03_task_size)
            return _list_result(core, response)

        return await self.unary(context, call)

    async def GetExtendedAgentCard(
        self, request: pb03.GetAgentCardRequest, context: Context
    ) -> Any:
        """The draft's name for GetAgentCard; its card also lists `supported_interfaces`."""

        async def call() -> pb03.AgentCard:
            caller = await self.caller(context, request)
            return _draft_card(v03.card_out(await extended_card_get(caller=caller), "proto"))

        return await self.unary(context, call)

    async def CreateTaskPushNotification(self, request: bytes, context: Context) -> Any:
        """The method tables' create: the request in the table's shape or the v0.3 proto's."""
        return await self.unary(
            context, lambda: self._push_config_create(context, _push_create_request(request))
        )

    async def GetTaskPushNotification(
        self, request: pb03.GetTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self.GetTaskPushNotificationConfig(_table_config_name(request), context)

    async def DeleteTaskPushNotification(
        self, request: pb03.DeleteTaskPushNotificationConfigRequest, context: Context
    ) -> Any:
        return await self.DeleteTaskPushNotificationConfig(_table_config_name(request), context)

    # The draft's and the tables' names for calls the v0.3 proto has, in the same shapes.
    ListTask = ListTasks
    SubscribeToTask = TaskSubscription
    SetTaskPushNotificationConfig = CreateTaskPushNotificationConfig
    ListTaskPushNotification = ListTaskPushNotificationConfig


# --- the draft's and the tables' messages <-> the v0.3 codec --------------------------------


def _list_request(request: pbx.ListTasksRequest) -> pb10.ListTasksRequest:
    """The draft's ListTasksRequest (field for field v0.3's tasks/list params, which the
    method tables' ListTask takes) checked and converted as JSON-RPC and REST do it."""
    params: dict[str, Any] = {}
    if request.context_id:
        params["contextId"] = request.context_id
    if request.status:  # UNSPECIFIED: no filter
        params["status"] = proto03.FromProto.task_state(request.status).value
    if request.HasField("page_size"):
        params["pageSize"] = request.page_size
    if request.page_token:
        params["pageToken"] = request.page_token
    if request.HasField("history_length"):
        params["historyLength"] = request.history_length
    if request.last_updated_after:
        params["lastUpdatedAfter"] = request.last_updated_after
    if request.HasField("include_artifacts"):
        params["includeArtifacts"] = request.include_artifacts
    return v03.v03_convert("ListTasks", v03.v03_list_request, params)


def _v03_task_size(task: pb10.Task) -> int:
    """A task's bytes as the v0.3 service answers it: mostly as in v1.0, but a data part that
    is not an object is wrapped (`{"value": ...}` and a metadata flag), up to four times its
    v1.0 size, and the page bound is for what gRPC clients receive."""
    return v03.task_out(task, "proto").ByteSize()


def _list_result(request: pb10.ListTasksRequest, response: pb10.ListTasksResponse) -> Any:
    """The draft's ListTasksResponse: v0.3 tasks, artifacts only when asked for (as tasks/list
    answers in JSON-RPC and REST)."""
    tasks = [v03.task_out(task, "proto") for task in response.tasks]
    if not request.include_artifacts:
        for task in tasks:
            task.ClearField("artifacts")
    return pbx.ListTasksResponse(
        tasks=tasks,
        next_page_token=response.next_page_token,
        page_size=response.page_size,
        total_size=response.total_size,
    )


def _draft_card(card: pb03.AgentCard) -> pb03.AgentCard:
    """The v0.3 card as the draft's AgentCard: the same fields, plus `supported_interfaces`
    (19) listing the interfaces the card announces (`url` and `additional_interfaces`)."""
    interfaces = [pb03.AgentInterface(url=card.url, transport=card.preferred_transport)]
    interfaces += [i for i in card.additional_interfaces if i not in interfaces]
    extra = pbx.AgentCardSupportedInterfaces(supported_interfaces=interfaces)
    card.MergeFromString(extra.SerializeToString())  # kept as a field v0.3 does not declare
    return card


def _push_create_request(data: bytes) -> pb03.CreateTaskPushNotificationConfigRequest:
    """CreateTaskPushNotification's request in either shape a document gives it: the v0.3
    proto's (`parent` 1, `config_id` 2, `config` 3; the v0.3 method tables name the call) or
    the mapping table's (`config` 1, the config's `name` naming the task). Field 1 is a
    `tasks/{id}` string in one and an encoded config in the other, which starts with a field
    tag, never with "t"."""
    with contextlib.suppress(DecodeError):  # an encoded config is rarely valid UTF-8
        request = pb03.CreateTaskPushNotificationConfigRequest.FromString(data)
        if not request.parent or request.parent.startswith("tasks/"):
            return request
    try:
        config = pbx.SetTaskPushNotificationRequest.FromString(data).config
    except DecodeError:
        raise InvalidParamsError(
            "The request is neither {parent = 1, config_id = 2, config = 3} with 'parent' "
            "'tasks/{id}' nor {config = 1}."
        ) from None
    task_id, config_id = _v03_config_name(config.name, config_optional=True)
    return pb03.CreateTaskPushNotificationConfigRequest(
        parent=f"tasks/{task_id}", config_id=config_id, config=config
    )


_TABLE_CONFIG_NAME = re.compile(r"(tasks/[^/]+)/pushNotification/([^/]+)")

_Named = TypeVar(
    "_Named",
    pb03.GetTaskPushNotificationConfigRequest,
    pb03.DeleteTaskPushNotificationConfigRequest,
)


def _table_config_name(request: _Named) -> _Named:
    """The mapping table names a config `tasks/{id}/pushNotification/{configId}`; the v0.3
    proto (which the other documents follow) `.../pushNotificationConfigs/{configId}`."""
    match = _TABLE_CONFIG_NAME.fullmatch(request.name)
    if match is None:
        return request
    return type(request)(name=f"{match.group(1)}/pushNotificationConfigs/{match.group(2)}")


# --- serving the v0.3 service under every name ------------------------------------------------

# Read as bytes: the handler decides between the two shapes its documents give the request.
_RAW_REQUESTS = {"CreateTaskPushNotification": lambda data: data}


class _Undecodable:
    """A request whose bytes are not its message. grpcio's generated handlers decode before
    the servicer runs and answer such a call with a bare status; here the method answers it
    INVALID_ARGUMENT with an ErrorInfo, as any other client mistake."""

    __slots__ = ("error",)

    def __init__(self, error: InvalidParamsError) -> None:
        self.error = error


def _decoder(request_class: type[Message]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return request_class.FromString(data)
        except DecodeError as exc:
            return _Undecodable(
                InvalidParamsError(
                    f"The request is not a valid {request_class.DESCRIPTOR.full_name}: {exc}"
                )
            )

    return decode


def _refusing_undecodable(method: Callable, dialect: str, streaming: bool) -> Callable:
    async def refuse(request: _Undecodable, context: Context) -> None:
        status = grpc_status_of(request.error, dialect)
        await context.abort(status.code, status.details, status.trailing_metadata)

    if streaming:

        async def stream(request: Any, context: Context) -> AsyncIterator[Any]:
            if isinstance(request, _Undecodable):
                await refuse(request, context)
            async for response in method(request, context):
                yield response

        return stream

    async def unary(request: Any, context: Context) -> Any:
        if isinstance(request, _Undecodable):
            await refuse(request, context)
        return await method(request, context)

    return unary


def service_handlers(
    service: ServiceDescriptor, servicer: _Service, names: Iterable[str] | None = None
) -> dict[str, grpc.RpcMethodHandler]:
    """The handlers of a service's methods (every one, or `names`) on `servicer`, whose
    requests are decoded so that bytes that are not the method's message are answered
    INVALID_ARGUMENT (_Undecodable)."""
    wanted = None if names is None else set(names)
    handlers = {}
    for method in service.methods:
        if wanted is not None and method.name not in wanted:
            continue
        request_class = message_factory.GetMessageClass(method.input_type)
        response_class = message_factory.GetMessageClass(method.output_type)
        handler = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = handler(
            _refusing_undecodable(
                getattr(servicer, method.name), servicer.dialect, method.server_streaming
            ),
            request_deserializer=_RAW_REQUESTS.get(method.name, _decoder(request_class)),
            response_serializer=response_class.SerializeToString,
        )
    return handlers


def compat_handlers(servicer: A2AServiceV03) -> dict[str, dict[str, grpc.RpcMethodHandler]]:
    """By service name, the method handlers to add beside the v0.3 proto's methods of
    `a2a.v1.A2AService` (served on `servicer`): the other documents' methods on
    `a2a.v1.A2AService`, and every method on `a2a.A2AService` (bound to the same agent)."""
    v03_proto = {m.name for m in pb03.DESCRIPTOR.services_by_name["A2AService"].methods}
    every = [m.name for m in COMPAT_SERVICE_DESCRIPTOR.methods]
    return {
        V03_SERVICE: service_handlers(
            COMPAT_SERVICE_DESCRIPTOR, servicer, [n for n in every if n not in v03_proto]
        ),
        COMPAT_SERVICE: service_handlers(
            COMPAT_SERVICE_DESCRIPTOR, A2AServiceV03(COMPAT_SERVICE, bound=servicer.bound)
        ),
    }
