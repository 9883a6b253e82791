"""Functional equivalence of the bindings: one set of scenarios, run over JSON-RPC, HTTP+JSON
(REST) and gRPC in A2A 1.0 and 0.3, against real daphne + Celery + the gRPC sidecar, asserting
the same outcomes on each.

The official a2a-sdk clients do what they can (send, get, cancel, stream, subscribe, the extended
card, push configs, v1.0 list). What they cannot, raw httpx does through one helper per
operation: v0.3 ListTasks (the compat clients have none), v0.3 REST push config list and delete
(the compat REST client has neither), SSE with the events' `id:` and
resuming with `Last-Event-ID`, and the errors as they travel on the wire (the JSON-RPC code, or
the REST HTTP status with `error.details[0].reason`). Every helper answers in v1.0 protos
(`a2a.types`) or raises the A2A error class, so the scenarios read the same on every binding.

Over gRPC the raw helpers are the generated stubs (v1.0 `lf.a2a.v1.A2AService`, v0.3
`a2a.v1.A2AService`, whose ListTasks is the pre-1.0 draft's, in bindings/protos' messages), and
an error on the wire is its status code plus the `google.rpc.Status`
ErrorInfo reason (and, in v0.3, the `<ErrorClass>: ` message prefix). What gRPC cannot do is
skipped in the parametrization with its reason, never dropped: resuming with `Last-Event-ID`
(gRPC streams have no event ids).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as v03
from a2a.types import (
    AgentCard,
    AuthenticationInfo,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.types import a2a_pb2_grpc as pb10_grpc
from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    A2A_REASON_TO_ERROR,
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from agents.errors import AuthenticationRequired
from bindings.protos import messages_pb2 as seed_pb2

from .clients import (
    AGENT_METADATA,
    GRPC,
    HTTP_JSON,
    JSONRPC,
    V0_3,
    V1_0,
    credential_headers,
    grpc_tenant,
    sdk_client,
    send,
    user_message,
)
from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# What a combination cannot do, and why: its scenarios are skipped in the parametrization.
NO_EVENT_IDS = (
    "gRPC streams have no event ids: resuming with Last-Event-ID is SSE's (JSON-RPC, REST)"
)

NAMES = {JSONRPC: "jsonrpc", HTTP_JSON: "rest", GRPC: "grpc"}
ALL_COMBINATIONS = [
    (binding, version) for binding in (JSONRPC, HTTP_JSON, GRPC) for version in (V1_0, V0_3)
]


def combinations(**cannot: str) -> list[Any]:
    """Every combination; those named in `cannot` (`grpc`, `grpc_0_3`) skipped with the reason
    given."""
    params = []
    for binding, version in ALL_COMBINATIONS:
        name = NAMES[binding]
        reason = cannot.get(f"{name}_{version.replace('.', '_')}") or cannot.get(name)
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param((binding, version), id=f"{name}-{version}", marks=marks))
    return params


COMBINATIONS = combinations()
# The combinations that resume by event id (not gRPC).
RESUMING = combinations(grpc=NO_EVENT_IDS)
# What a reading combination cannot show in test_a_task_reads_the_same_through_every_binding.
CANNOT_READ = {
    (GRPC, V1_0): {"event log": NO_EVENT_IDS},
    (GRPC, V0_3): {"event log": NO_EVENT_IDS},
}

# Push URLs on this machine: the live platform allowlists loopback (A2A_PUSH_ALLOWED_NETWORKS);
# nothing needs to listen there for CRUD.
HOOK = "http://127.0.0.1:9/hook"
OTHER_HOOK = "http://127.0.0.1:9/other"

COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
SUBMITTED = TaskState.TASK_STATE_SUBMITTED
CANCELED = TaskState.TASK_STATE_CANCELED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
TERMINAL = {
    COMPLETED,
    CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
}

ERROR_OF_CODE = {code: cls for cls, code in JSON_RPC_ERROR_CODE_MAP.items()}
RPC_METHODS = {
    V1_0: {
        "list": "ListTasks",
        "get": "GetTask",
        "stream": "SendStreamingMessage",
        "subscribe": "SubscribeToTask",
        "card": "GetExtendedAgentCard",
    },
    V0_3: {
        "list": "tasks/list",
        "get": "tasks/get",
        "stream": "message/stream",
        "subscribe": "tasks/resubscribe",
        "card": "agent/getAuthenticatedExtendedCard",
    },
}


def texts(artifacts: Any) -> list[str]:
    return [part.text for artifact in artifacts for part in artifact.parts]


def kind(response: StreamResponse) -> str:
    return str(response.WhichOneof("payload"))


def state_of(response: StreamResponse) -> int:
    if response.HasField("task"):
        return response.task.status.state
    return response.status_update.status.state


@dataclass
class Frame:
    """One SSE event of a stream: its `id:` and its result as a v1.0 proto."""

    id: str | None
    response: StreamResponse

    @property
    def seq(self) -> int:
        assert self.id is not None
        return int(self.id.rpartition(":")[2])


# --- the wire: errors ------------------------------------------------------------------------


def rpc_error(error: dict[str, Any]) -> A2AError:
    """A JSON-RPC error object as the A2A error class its code names; the ErrorInfo reason in
    `data` must name the same class."""
    cls = ERROR_OF_CODE.get(error.get("code"))  # type: ignore[arg-type]
    assert cls is not None, f"not an A2A JSON-RPC error code: {error}"
    reasons = [d.get("reason") for d in error.get("data") or [] if isinstance(d, dict)]
    assert reasons == [A2A_ERROR_MAPPING[cls].reason], error
    return cls(error.get("message", ""))


def rest_error(status: int, body: Any, version: str) -> A2AError:
    """A REST `google.rpc.Status` error body as the A2A error class its reason names; the HTTP
    status (and, in v0.3, the `type` the compat clients read) must name the same class."""
    error = body["error"]
    reason = error["details"][0]["reason"]
    cls = A2A_REASON_TO_ERROR.get(reason)
    assert cls is not None, f"not an A2A error reason: {body}"
    assert status == error["code"] == A2A_ERROR_MAPPING[cls].http_code, (status, body)
    assert error["status"] == A2A_ERROR_MAPPING[cls].grpc_status, body
    if version == V0_3:
        assert body["type"] == cls.__name__, body
    return cls(error["message"])


def grpc_error(error: grpc.aio.AioRpcError, version: str) -> A2AError | AuthenticationRequired:
    """A gRPC error as the A2A error class its ErrorInfo reason names; the status code (and, in
    v0.3, the class name the compat clients read from the message) must name the same class."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None, f"no google.rpc.Status: {error.code()} {error.details()!r}"
    assert status.code == error.code().value[0] and status.message == error.details(), status
    infos = []
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        assert detail.Unpack(info), f"not an ErrorInfo: {detail}"
        infos.append(info)
    assert [i.domain for i in infos] == ["a2a-protocol.org"], status
    reason = infos[0].reason
    if reason == AuthenticationRequired.reason:
        assert error.code() == grpc.StatusCode.UNAUTHENTICATED, status
        return AuthenticationRequired(status.message)
    cls = A2A_REASON_TO_ERROR.get(reason)
    assert cls is not None, f"not an A2A error reason: {status}"
    # VersionNotSupported is UNIMPLEMENTED on gRPC (the binding's requirement and the TCK).
    code = (
        "UNIMPLEMENTED" if cls is VersionNotSupportedError else A2A_ERROR_MAPPING[cls].grpc_status
    )
    assert error.code().name == code, (error.code(), status)
    message = status.message
    if version == V0_3:
        prefix = f"{cls.__name__}: "
        assert message.startswith(prefix), status
        message = message[len(prefix) :]
    return cls(message)


def unauthenticated(response: httpx.Response, *, rest: bool) -> AuthenticationRequired:
    assert response.status_code == 401, response.text
    assert response.headers["WWW-Authenticate"].startswith("Bearer"), response.headers
    body = response.json()
    details = body["error"]["details"] if rest else body["error"]["data"]
    assert [d["reason"] for d in details] == [AuthenticationRequired.reason], body
    return AuthenticationRequired(body["error"]["message"])


# --- one binding x version, behind one interface -------------------------------------------------


class Binding:
    """One (binding, version) combination: the SDK client where it applies, raw httpx where it
    does not. Every method answers in v1.0 protos or raises the A2A error class."""

    def __init__(
        self,
        url: str,
        binding: str,
        version: str,
        client: Client,
        streamer: Client,
        http: httpx.AsyncClient,
    ) -> None:
        self.url = url
        self.binding = binding
        self.version = version
        self.client = client  # non-streaming SDK client
        self.streamer = streamer  # streaming SDK client
        self.http = http  # raw HTTP, with the same credentials

    @property
    def rest(self) -> bool:
        return self.binding == HTTP_JSON

    @property
    def rest_root(self) -> str:
        return self.url if self.version == V1_0 else f"{self.url}v1/"

    # --- the SDK --------------------------------------------------------------------------

    async def send(self, message: Message, **configuration: Any) -> Task:
        response = await send(self.client, message, **configuration)
        assert response.HasField("task"), response
        return response.task

    async def get(self, task_id: str, history_length: int | None = None) -> Task:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return await self.client.get_task(request)

    async def cancel(self, task_id: str) -> Task:
        return await self.client.cancel_task(CancelTaskRequest(id=task_id))

    async def list_tasks(self, **fields: Any) -> ListTasksResponse:
        if self.version == V1_0:
            return await self.client.list_tasks(ListTasksRequest(**fields))
        return await self.raw_list(**fields)  # the v0.3 compat clients have no list_tasks

    async def stream(self, message: Message) -> list[StreamResponse]:
        request = SendMessageRequest(message=message)
        return [r async for r in self.streamer.send_message(request)]

    async def subscribe(
        self, task_id: str, last_event_id: str | None = None
    ) -> list[StreamResponse]:
        if last_event_id is None:
            request = SubscribeToTaskRequest(id=task_id)
            return [r async for r in self.streamer.subscribe(request)]
        # The SDK sends no Last-Event-ID: resume with raw SSE.
        frames = await self.raw_subscribe(task_id, last_event_id, post=True)
        return [f.response for f in frames]

    async def extended_card(self) -> AgentCard:
        return await self.client.get_extended_agent_card(GetExtendedAgentCardRequest())

    async def create_push_config(
        self,
        task_id: str,
        *,
        config_id: str = "",
        url: str = HOOK,
        token: str = "",
        credentials: str = "",
    ) -> TaskPushNotificationConfig:
        config = TaskPushNotificationConfig(task_id=task_id, id=config_id, url=url, token=token)
        if credentials:
            config.authentication.scheme = "Bearer"
            config.authentication.credentials = credentials
        return await self.client.create_task_push_notification_config(config)

    async def get_push_config(self, task_id: str, config_id: str) -> TaskPushNotificationConfig:
        request = GetTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
        return await self.client.get_task_push_notification_config(request)

    @property
    def _v03_rest(self) -> bool:
        """The v0.3 compat REST client has no push config list or delete: raw HTTP there."""
        return self.rest and self.version == V0_3

    async def list_push_configs(self, task_id: str) -> ListTaskPushNotificationConfigsResponse:
        if not self._v03_rest:
            request = ListTaskPushNotificationConfigsRequest(task_id=task_id)
            return await self.client.list_task_push_notification_configs(request)
        path = f"tasks/{task_id}/pushNotificationConfigs"
        result = await self._call("push list", params={}, rest=("GET", path))
        configs = [
            conversions.to_core_task_push_notification_config(
                proto_utils.FromProto.task_push_notification_config(
                    ParseDict(config, pb03.TaskPushNotificationConfig())
                )
            )
            for config in result["configs"]
        ]
        return ListTaskPushNotificationConfigsResponse(
            configs=configs, next_page_token=result.get("nextPageToken", "")
        )

    async def delete_push_config(self, task_id: str, config_id: str) -> None:
        if not self._v03_rest:
            request = DeleteTaskPushNotificationConfigRequest(task_id=task_id, id=config_id)
            await self.client.delete_task_push_notification_config(request)
            return
        path = f"tasks/{task_id}/pushNotificationConfigs/{config_id}"
        assert await self._call("push delete", params={}, rest=("DELETE", path)) == {}

    # --- raw HTTP, one helper per operation ----------------------------------------------------

    def _rpc_body(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        method = RPC_METHODS[self.version][operation]
        return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}

    def _rpc_headers(self) -> dict[str, str]:
        # The version is named, as the SDK's transports name it: a request without one reads a
        # task in the version of the request that created it (bindings/jsonrpc.py).
        return {"A2A-Version": self.version}

    async def _call(
        self,
        operation: str,
        *,
        params: dict[str, Any],
        rest: tuple[str, str],
        query: dict[str, Any] | None = None,
    ) -> Any:
        """One non-streaming call; its result as JSON (v1.0 or v0.3 shapes), or the error."""
        if self.rest:
            method, path = rest
            response = await self.http.request(method, self.rest_root + path, params=query)
            if response.status_code == 401:
                raise unauthenticated(response, rest=True)
            if response.status_code >= 400:
                raise rest_error(response.status_code, response.json(), self.version)
            assert response.status_code == 200, response.text
            return response.json()
        response = await self.http.post(
            self.url, json=self._rpc_body(operation, params), headers=self._rpc_headers()
        )
        if response.status_code == 401:
            raise unauthenticated(response, rest=False)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["id"] == 7, answer
        if "error" in answer:
            raise rpc_error(answer["error"])
        return answer["result"]

    def _task(self, value: dict[str, Any]) -> Task:
        if self.version == V1_0:
            return ParseDict(value, Task())
        if self.rest:
            return conversions.to_core_task(
                proto_utils.FromProto.task(ParseDict(value, pb03.Task()))
            )
        return conversions.to_core_task(v03.Task.model_validate(value))

    async def raw_get(self, task_id: str, history_length: int | None = None) -> Task:
        params: dict[str, Any] = {"id": task_id}
        query: dict[str, Any] = {}
        if history_length is not None:
            params["historyLength"] = query["historyLength"] = history_length
        result = await self._call(
            "get", params=params, rest=("GET", f"tasks/{task_id}"), query=query
        )
        return self._task(result)

    async def raw_list(self, **fields: Any) -> ListTasksResponse:
        # Both versions name the fields alike: contextId, pageSize, pageToken, historyLength.
        params = MessageToDict(ListTasksRequest(**fields))
        query = {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
        result = await self._call("list", params=params, rest=("GET", "tasks"), query=query)
        if self.version == V1_0:
            return ParseDict(result, ListTasksResponse())
        return ListTasksResponse(
            tasks=[self._task(t) for t in result["tasks"]],
            total_size=result["totalSize"],
            page_size=result["pageSize"],
            next_page_token=result["nextPageToken"],
        )

    async def raw_extended_card(self) -> dict[str, Any]:
        path = "extendedAgentCard" if self.version == V1_0 else "card"
        return await self._call("card", params={}, rest=("GET", path))

    def _send_params(self, message: Message) -> dict[str, Any]:
        request = SendMessageRequest(message=message)
        if self.version == V1_0:
            return MessageToDict(request)
        compat = conversions.to_compat_send_message_request(request, request_id=0).params
        if not self.rest:
            return compat.model_dump(by_alias=True, exclude_none=True, mode="json")
        return MessageToDict(
            pb03.SendMessageRequest(
                request=proto_utils.ToProto.message(compat.message),
                metadata=proto_utils.ToProto.metadata(compat.metadata),
            )
        )

    def _event(self, value: dict[str, Any]) -> StreamResponse:
        if self.version == V1_0:
            return ParseDict(value, StreamResponse())
        if self.rest:
            event = proto_utils.FromProto.stream_response(ParseDict(value, pb03.StreamResponse()))
        else:
            event = v03.SendStreamingMessageSuccessResponse.model_validate(
                {"jsonrpc": "2.0", "id": 7, "result": value}
            ).result
        return conversions.to_core_stream_response(
            v03.SendStreamingMessageSuccessResponse(result=event)
        )

    async def _sse(
        self,
        operation: str,
        *,
        params: dict[str, Any],
        rest: tuple[str, str],
        headers: dict[str, str] | None = None,
        stop_after: int | None = None,
    ) -> list[Frame]:
        """A streaming call's events (the first `stop_after`, then the connection drops)."""
        headers = dict(headers or {})
        if self.rest:
            method, path = rest
            request = self.http.build_request(
                method,
                self.rest_root + path,
                json=params if path.endswith("message:stream") else None,
                headers=headers,
            )
        else:
            request = self.http.build_request(
                "POST",
                self.url,
                json=self._rpc_body(operation, params),
                headers={**self._rpc_headers(), **headers},
            )
        response = await self.http.send(request, stream=True)
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()  # refused before the stream began
                if self.rest:
                    raise rest_error(response.status_code, response.json(), self.version)
                assert response.status_code == 200, response.text
                raise rpc_error(response.json()["error"])
            assert response.status_code == 200
            return await self._frames(response, stop_after)
        finally:
            await response.aclose()

    async def _frames(self, response: httpx.Response, stop_after: int | None) -> list[Frame]:
        frames: list[Frame] = []
        event_id: str | None = None
        event_name: str | None = None
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue  # keep-alive
            if line.startswith("id: "):
                event_id = line[4:]
            elif line.startswith("event: "):
                event_name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                body = json.loads("\n".join(data))
                if event_name == "error":
                    if self.rest:
                        raise rest_error(body["error"]["code"], body, self.version)
                    raise rpc_error(body["error"])
                if not self.rest:
                    assert body["id"] == 7 and "error" not in body, body
                    body = body["result"]
                frames.append(Frame(event_id, self._event(body)))
                event_id, event_name, data = None, None, []
                if stop_after is not None and len(frames) >= stop_after:
                    break
        return frames

    async def raw_stream(self, message: Message, *, stop_after: int | None = None) -> list[Frame]:
        return await self._sse(
            "stream",
            params=self._send_params(message),
            rest=("POST", "message:stream"),
            stop_after=stop_after,
        )

    async def raw_subscribe(
        self, task_id: str, last_event_id: str | None = None, *, post: bool = False
    ) -> list[Frame]:
        """REST: GET `:subscribe` (v0.3: its `:resubscribe` alias), or POST `:subscribe` as the
        SDK does; JSON-RPC: always a POST."""
        if post or self.version == V1_0:
            rest = ("POST" if post else "GET", f"tasks/{task_id}:subscribe")
        else:
            rest = ("GET", f"tasks/{task_id}:resubscribe")
        headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
        return await self._sse("subscribe", params={"id": task_id}, rest=rest, headers=headers)


class GrpcBinding(Binding):
    """gRPC: the SDK's gRPC clients, and the generated stubs for the raw calls (the key as
    `x-api-key` metadata; the agent as the v1.0 request's `tenant`, or v0.3 `a2a-agent`)."""

    def __init__(
        self,
        *args: Any,
        channel: grpc.aio.Channel,
        tenant: str,
        key: str | None,
        token: str | None = None,
    ) -> None:
        super().__init__(*args)
        self.tenant = tenant
        self.key = key
        self.token = token
        self.channel = channel
        self.stub: Any = (
            pb10_grpc.A2AServiceStub(channel)
            if self.version == V1_0
            else pb03_grpc.A2AServiceStub(channel)
        )

    def _metadata(self) -> list[tuple[str, str]]:
        metadata = [("a2a-version", self.version)]
        metadata += [(k.lower(), v) for k, v in credential_headers(self.key, self.token).items()]
        if self.version == V0_3:
            metadata.append((AGENT_METADATA, self.tenant))
        return metadata

    async def _unary(self, method: Any, request: Any) -> Any:
        try:
            return await method(request, metadata=self._metadata(), timeout=30)
        except grpc.aio.AioRpcError as error:
            raise grpc_error(error, self.version) from None

    async def _stream(self, call: Any, stop_after: int | None = None) -> list[Frame]:
        frames: list[Frame] = []
        try:
            async for response in call:
                if self.version == V0_3:
                    response = conversions.to_core_stream_response(
                        v03.SendStreamingMessageSuccessResponse(
                            result=proto_utils.FromProto.stream_response(response)
                        )
                    )
                frames.append(Frame(None, response))
                if stop_after is not None and len(frames) >= stop_after:
                    break
        except grpc.aio.AioRpcError as error:
            raise grpc_error(error, self.version) from None
        finally:
            call.cancel()
        return frames

    async def raw_get(self, task_id: str, history_length: int | None = None) -> Task:
        if self.version == V1_0:
            request = GetTaskRequest(tenant=self.tenant, id=task_id)
            if history_length is not None:
                request.history_length = history_length
            return await self._unary(self.stub.GetTask, request)
        # v0.3: historyLength 0 (or none) is "no limit".
        request03 = pb03.GetTaskRequest(name=f"tasks/{task_id}", history_length=history_length)
        task = await self._unary(self.stub.GetTask, request03)
        return conversions.to_core_task(proto_utils.FromProto.task(task))

    async def raw_list(self, **fields: Any) -> ListTasksResponse:
        if self.version == V1_0:
            return await self._unary(
                self.stub.ListTasks, ListTasksRequest(tenant=self.tenant, **fields)
            )
        # v0.3: the service's ListTasks, the pre-1.0 draft's method, in the draft's messages.
        core = ListTasksRequest(**fields)
        request = seed_pb2.ListTasksRequest(
            context_id=core.context_id, status=core.status, page_token=core.page_token
        )
        for field in ("page_size", "history_length", "include_artifacts"):
            if core.HasField(field):
                setattr(request, field, getattr(core, field))
        list_tasks = self.channel.unary_unary(
            f"/{pb03.DESCRIPTOR.services_by_name['A2AService'].full_name}/ListTasks",
            request_serializer=seed_pb2.ListTasksRequest.SerializeToString,
            response_deserializer=seed_pb2.ListTasksResponse.FromString,
        )
        answer = await self._unary(list_tasks, request)
        return ListTasksResponse(
            tasks=[conversions.to_core_task(proto_utils.FromProto.task(t)) for t in answer.tasks],
            total_size=answer.total_size,
            page_size=answer.page_size,
            next_page_token=answer.next_page_token,
        )

    async def raw_extended_card(self) -> dict[str, Any]:
        if self.version == V1_0:
            request = GetExtendedAgentCardRequest(tenant=self.tenant)
            return MessageToDict(await self._unary(self.stub.GetExtendedAgentCard, request))
        return MessageToDict(await self._unary(self.stub.GetAgentCard, pb03.GetAgentCardRequest()))

    async def raw_stream(self, message: Message, *, stop_after: int | None = None) -> list[Frame]:
        request = SendMessageRequest(message=message)
        if self.version == V1_0:
            request.tenant = self.tenant
            call = self.stub.SendStreamingMessage(request, metadata=self._metadata(), timeout=60)
            return await self._stream(call, stop_after)
        compat = conversions.to_compat_send_message_request(request, request_id=0).params
        request03 = pb03.SendMessageRequest(
            request=proto_utils.ToProto.message(compat.message),
            metadata=proto_utils.ToProto.metadata(compat.metadata),
        )
        call = self.stub.SendStreamingMessage(request03, metadata=self._metadata(), timeout=60)
        return await self._stream(call, stop_after)

    async def raw_subscribe(
        self, task_id: str, last_event_id: str | None = None, *, post: bool = False
    ) -> list[Frame]:
        if last_event_id is not None:
            pytest.fail(NO_EVENT_IDS)
        if self.version == V1_0:
            request = SubscribeToTaskRequest(tenant=self.tenant, id=task_id)
            call = self.stub.SubscribeToTask(request, metadata=self._metadata(), timeout=60)
        else:
            request03 = pb03.TaskSubscriptionRequest(name=f"tasks/{task_id}")
            call = self.stub.TaskSubscription(request03, metadata=self._metadata(), timeout=60)
        return await self._stream(call)


@asynccontextmanager
async def connect(
    url: str, key: str | None, combination: tuple[str, str], *, token: str | None = None
) -> AsyncIterator[Binding]:
    """One combination's clients with a key, or with a bearer `token` instead."""
    binding, version = combination
    headers = credential_headers(key, token)
    credentials = {"key": key, "token": token}
    async with (
        sdk_client(url, **credentials, version=version, binding=binding) as client,
        sdk_client(
            url, **credentials, version=version, binding=binding, streaming=True
        ) as streamer,
        httpx.AsyncClient(headers=headers, timeout=30) as http,
    ):
        if binding != GRPC:
            yield Binding(url, binding, version, client, streamer, http)
            return
        # The sidecar's address and the agent's tenant, as the card advertises them: the first
        # GRPC interface of the version, as the SDK takes it (v0.3's is written twice, the
        # `host:port` target first, then the same as a `grpc://` URL).
        card = await A2ACardResolver(http, url).get_agent_card()
        address = next(
            i.url
            for i in card.supported_interfaces
            if i.protocol_binding == GRPC and i.protocol_version == version
        )
        async with grpc.aio.insecure_channel(address) as channel:
            yield GrpcBinding(
                url,
                binding,
                version,
                client,
                streamer,
                http,
                channel=channel,
                tenant=grpc_tenant(card),
                key=key,
                token=token,
            )


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(params=COMBINATIONS)
def combination(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


@pytest.fixture
def deploy(live_platform, make_tenant, make_agent, make_key) -> Callable[..., tuple[str, str]]:
    """A new tenant with one echo agent (configured as given) and a key: (agent URL, key)."""

    def make(*, push_notifications: bool = True, **config: Any) -> tuple[str, str]:
        tenant = make_tenant()
        agent = make_agent(tenant, "echo", config=config, push_notifications=push_notifications)
        return live_platform.agent_url(agent), make_key(tenant, "alice")

    return make


@pytest.fixture
def run(deploy, combination) -> Callable[..., Any]:
    """Run `scenario(binding)` against a fresh echo agent (configured as given)."""

    def go(scenario: Callable[[Binding], Awaitable[Any]], **config: Any) -> Any:
        url, key = deploy(**config)

        async def main() -> Any:
            async with connect(url, key, combination) as binding:
                return await scenario(binding)

        return asyncio.run(main())

    return go


async def until_state(b: Binding, task_id: str, states: set[int]) -> Task:
    """Get the task until it is in one of `states` (bounded; the state is asserted after)."""
    for _ in range(200):
        task = await b.get(task_id)
        if task.status.state in states:
            break
        await asyncio.sleep(0.05)
    return task


# --- scenarios ----------------------------------------------------------------------------------


def test_blocking_send_returns_completed_task_with_echo_artifact(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("hello there", mid()))
        assert task.status.state == COMPLETED
        assert texts(task.artifacts) == ["hello there"]
        assert task.history[0].parts[0].text == "hello there"
        assert task.id and task.context_id
        got = await b.get(task.id)
        assert got.status.state == COMPLETED and list(got.artifacts) == list(task.artifacts)

    run(scenario)


def test_non_blocking_send_then_get_sees_completion(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("later", mid()), return_immediately=True)
        assert task.status.state in (SUBMITTED, WORKING)
        assert not task.artifacts
        done = await until_state(b, task.id, TERMINAL)
        assert done.status.state == COMPLETED
        assert texts(done.artifacts) == ["later"]

    run(scenario, delay_seconds=0.5)


def test_get_with_history_length(run):
    async def scenario(b: Binding) -> None:
        first = await b.send(user_message("first", mid()))
        assert first.status.state == INPUT_REQUIRED
        follow_up = user_message("second", mid(), task_id=first.id, context_id=first.context_id)
        await b.send(follow_up)
        full = await b.get(first.id)
        history = [(m.role, m.parts[0].text) for m in full.history]
        assert [text for _, text in history][0] == "first" and len(history) >= 3
        assert "second" in [text for _, text in history]
        for n in (1, 2, len(history), len(history) + 5):
            limited = await b.get(first.id, history_length=n)
            assert [(m.role, m.parts[0].text) for m in limited.history] == history[-n:], n
            assert texts(limited.artifacts) == ["first\nsecond"]
            raw = await b.raw_get(first.id, history_length=n)
            assert [(m.role, m.parts[0].text) for m in raw.history] == history[-n:], n
        # 0 is "no history" in v1.0 but "no limit" in v0.3 (TaskQueryParams.historyLength).
        expected = [] if b.version == V1_0 else history
        zero = await b.get(first.id, history_length=0)
        assert [(m.role, m.parts[0].text) for m in zero.history] == expected, "historyLength 0"
        raw_zero = await b.raw_get(first.id, history_length=0)
        assert [(m.role, m.parts[0].text) for m in raw_zero.history] == expected, "raw, 0"

    run(scenario, input_required=True)


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_list_filters_by_context_and_pages_with_tokens(run):
    async def scenario(b: Binding) -> None:
        context = str(uuid.uuid4())
        ids = [
            (await b.send(user_message(f"n{n}", mid(), context_id=context))).id for n in range(3)
        ]
        await b.send(user_message("another context", mid()))
        pages: list[ListTasksResponse] = []
        token = ""
        for _ in range(5):
            fields: dict[str, Any] = {"context_id": context, "page_size": 2}
            if token:
                fields["page_token"] = token
            page = await b.list_tasks(**fields)
            pages.append(page)
            token = page.next_page_token
            if not token:
                break
        assert [len(p.tasks) for p in pages] == [2, 1]
        assert [p.total_size for p in pages] == [3, 3]
        assert [p.page_size for p in pages] == [2, 2]
        listed = [t.id for p in pages for t in p.tasks]
        assert listed == ids[::-1]  # the most recently updated first
        assert all(t.context_id == context for p in pages for t in p.tasks)
        assert all(t.status.state == COMPLETED for p in pages for t in p.tasks)
        everything = await b.list_tasks()
        assert everything.total_size == 4 and not everything.next_page_token

    run(scenario)


def test_cancel_running_task_then_cancel_again_is_not_cancelable(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("long job", mid()), return_immediately=True)
        working = await until_state(b, task.id, {WORKING})
        assert working.status.state == WORKING
        canceled = await b.cancel(task.id)
        assert canceled.id == task.id and canceled.status.state == CANCELED
        assert (await b.get(task.id)).status.state == CANCELED
        with pytest.raises(TaskNotCancelableError):
            await b.cancel(task.id)

    run(scenario, delay_seconds=30)


def test_multi_turn_input_required(run):
    async def scenario(b: Binding) -> None:
        first = await b.send(user_message("first", mid()))
        assert first.status.state == INPUT_REQUIRED
        assert first.status.message.parts[0].text  # the agent's question
        assert not first.artifacts
        follow_up = user_message("second", mid(), task_id=first.id, context_id=first.context_id)
        second = await b.send(follow_up)
        assert second.id == first.id and second.context_id == first.context_id
        assert second.status.state == COMPLETED
        assert texts(second.artifacts) == ["first\nsecond"]
        with pytest.raises(UnsupportedOperationError):  # a terminal task takes no more input
            await b.send(user_message("third", mid(), task_id=first.id))

    run(scenario, input_required=True)


def test_send_stream_yields_snapshot_then_events_until_completed(run):
    async def scenario(b: Binding) -> None:
        responses = await b.stream(user_message("streamed", mid()))
        kinds = [kind(r) for r in responses]
        assert kinds[0] == "task", kinds
        assert set(kinds[1:]) <= {"status_update", "artifact_update"}, kinds
        snapshot = responses[0].task
        assert snapshot.status.state in (SUBMITTED, WORKING)
        assert kinds[-1] == "status_update" and state_of(responses[-1]) == COMPLETED
        assert "artifact_update" in kinds
        events = responses[1:]
        assert {e.status_update.task_id or e.artifact_update.task_id for e in events} == {
            snapshot.id
        }
        streamed = [r.artifact_update.artifact for r in events if kind(r) == "artifact_update"]
        assert texts([*snapshot.artifacts, *streamed]) == ["streamed"]
        assert texts((await b.get(snapshot.id)).artifacts) == ["streamed"]

    run(scenario, delay_seconds=0.5)


def test_subscribe_to_a_running_task(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("watched", mid()), return_immediately=True)
        responses = await b.subscribe(task.id)
        kinds = [kind(r) for r in responses]
        assert kinds[0] == "task" and responses[0].task.id == task.id, kinds
        assert responses[0].task.status.state in (SUBMITTED, WORKING)
        assert set(kinds[1:]) <= {"status_update", "artifact_update"}, kinds
        assert kinds[-1] == "status_update" and state_of(responses[-1]) == COMPLETED
        streamed = [r.artifact_update.artifact for r in responses if kind(r) == "artifact_update"]
        assert texts([*responses[0].task.artifacts, *streamed]) == ["watched"]

    run(scenario, delay_seconds=1.0)


@pytest.mark.parametrize("combination", RESUMING)
def test_subscribe_with_last_event_id_replays_exactly_the_events_after_it(run):
    async def scenario(b: Binding) -> None:
        # Read the stream's first event, then drop the connection while the task works.
        (first,) = await b.raw_stream(user_message("resumed", mid()), stop_after=1)
        assert kind(first.response) == "task"
        task_id = first.response.task.id
        assert first.id and first.id.startswith(f"{task_id}:")
        rest = await b.subscribe(task_id, last_event_id=first.id)
        assert rest and kind(rest[-1]) == "status_update" and state_of(rest[-1]) == COMPLETED
        # The whole log, to compare with: a replay from its very start.
        everything = await b.raw_subscribe(task_id, last_event_id=f"{task_id}:0")
        seqs = [f.seq for f in everything]
        assert seqs == list(range(1, len(seqs) + 1)), seqs
        after = [f for f in everything if f.seq > first.seq]
        assert rest == [f.response for f in after]
        # From a middle event on: exactly the events after it, with their ids.
        middle = everything[len(everything) // 2]
        tail = await b.raw_subscribe(task_id, last_event_id=middle.id)
        assert [(f.id, f.response) for f in tail] == [
            (f.id, f.response) for f in everything if f.seq > middle.seq
        ]
        # From the last event: nothing, and the stream closes.
        assert await b.raw_subscribe(task_id, last_event_id=everything[-1].id) == []

    run(scenario, delay_seconds=0.5)


# --- errors: the same A2A error class on every binding -------------------------------------------


def test_task_not_found_for_an_unknown_id_and_another_tenants_task(deploy, combination):
    url, key = deploy()
    other_url, other_key = deploy()
    unknown = str(uuid.uuid4())

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            mine = await b.send(user_message("mine", mid()))
            with pytest.raises(TaskNotFoundError):
                await b.get(unknown)
            with pytest.raises(TaskNotFoundError):
                await b.raw_get(unknown)
            with pytest.raises(TaskNotFoundError):
                await b.cancel(unknown)
            with pytest.raises(TaskNotFoundError):
                await b.subscribe(unknown)
            with pytest.raises(TaskNotFoundError):
                await b.raw_subscribe(unknown)
        async with connect(other_url, other_key, combination) as other:
            with pytest.raises(TaskNotFoundError):
                await other.get(mine.id)
            with pytest.raises(TaskNotFoundError):
                await other.raw_get(mine.id)
            with pytest.raises(TaskNotFoundError):
                await other.cancel(mine.id)
            with pytest.raises(TaskNotFoundError):  # not "already completed": it is not theirs
                await other.subscribe(mine.id)
            with pytest.raises(TaskNotFoundError):
                await other.raw_subscribe(mine.id)

    asyncio.run(scenario())


@pytest.mark.parametrize("combination", RESUMING)
def test_another_tenant_cannot_replay_a_task_by_event_id(deploy, combination):
    url, key = deploy()
    other_url, other_key = deploy()

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            mine = await b.send(user_message("mine", mid()))
        async with connect(other_url, other_key, combination) as other:
            with pytest.raises(TaskNotFoundError):
                await other.raw_subscribe(mine.id, last_event_id=f"{mine.id}:0")

    asyncio.run(scenario())


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_another_tenant_lists_none_of_my_tasks(deploy, combination):
    url, key = deploy()
    other_url, other_key = deploy()

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            await b.send(user_message("mine", mid()))
            assert (await b.list_tasks()).total_size == 1
        async with connect(other_url, other_key, combination) as other:
            assert (await other.list_tasks()).total_size == 0
            assert (await other.raw_list()).total_size == 0

    asyncio.run(scenario())


def test_cancel_of_a_finished_task_is_not_cancelable(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("done", mid()))
        with pytest.raises(TaskNotCancelableError):
            await b.cancel(task.id)
        assert (await b.get(task.id)).status.state == COMPLETED

    run(scenario)


def test_subscribe_to_a_finished_task_is_unsupported(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("done", mid()))
        with pytest.raises(UnsupportedOperationError):
            await b.subscribe(task.id)
        with pytest.raises(UnsupportedOperationError):
            await b.raw_subscribe(task.id)

    run(scenario)


def test_invalid_params(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("x", mid()))
        with pytest.raises(InvalidParamsError):
            await b.get(task.id, history_length=-1)
        with pytest.raises(InvalidParamsError):
            await b.raw_get(task.id, history_length=-1)

    run(scenario)


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_invalid_list_page_size(run):
    async def scenario(b: Binding) -> None:
        await b.send(user_message("x", mid()))
        for size in (0, 101):
            with pytest.raises(InvalidParamsError):
                await b.list_tasks(page_size=size)
            with pytest.raises(InvalidParamsError):
                await b.raw_list(page_size=size)
        assert (await b.list_tasks(page_size=100)).total_size == 1

    run(scenario)


@pytest.mark.parametrize("combination", RESUMING)
def test_last_event_id_of_another_task_is_invalid(run):
    async def scenario(b: Binding) -> None:
        task = await b.send(user_message("x", mid()))
        with pytest.raises(InvalidParamsError):
            await b.raw_subscribe(task.id, last_event_id=f"{uuid.uuid4()}:1")

    run(scenario)


def test_extended_card_needs_a_key(deploy, combination):
    url, key = deploy()

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            card = await b.extended_card()
            assert card.name == "Echo" and card.capabilities.extended_agent_card
            assert (await b.raw_extended_card())["name"] == "Echo"
        async with connect(url, None, combination) as anonymous:
            with pytest.raises(A2AClientError) as caught:
                await anonymous.extended_card()
            cause = caught.value.__cause__
            if anonymous.binding == GRPC:
                assert isinstance(cause, grpc.aio.AioRpcError), repr(caught.value)
                assert cause.code() == grpc.StatusCode.UNAUTHENTICATED, cause
            else:
                assert isinstance(cause, httpx.HTTPStatusError), repr(caught.value)
                assert cause.response.status_code == 401
            with pytest.raises(AuthenticationRequired):
                await anonymous.raw_extended_card()

    asyncio.run(scenario())


def test_push_config_crud(deploy, combination):
    url, key = deploy()
    other_url, other_key = deploy()

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            task = await b.send(user_message("x", mid()))
            # Created with a client-chosen id, and with a generated one.
            # Its token and credentials are write-only: the SDK reads answers without them.
            chosen = await b.create_push_config(
                task.id, config_id="cfg-1", token="secret", credentials="creds"
            )
            assert (chosen.task_id, chosen.id, chosen.url, chosen.token) == (
                task.id,
                "cfg-1",
                HOOK,
                "",
            )
            assert chosen.authentication == AuthenticationInfo(scheme="Bearer")
            generated = await b.create_push_config(task.id, url=OTHER_HOOK)
            assert uuid.UUID(generated.id), generated
            assert (generated.task_id, generated.url) == (task.id, OTHER_HOOK)
            # Get, list.
            assert await b.get_push_config(task.id, "cfg-1") == chosen
            assert await b.get_push_config(task.id, generated.id) == generated
            listed = await b.list_push_configs(task.id)
            assert sorted(c.id for c in listed.configs) == sorted(["cfg-1", generated.id])
            assert {c.id: c for c in listed.configs}["cfg-1"] == chosen
            assert not listed.next_page_token
            # Delete; then it is not found, deleting it again is no error (idempotent, v1.0.1
            # 3.1.10), and the other config is all the list has.
            await b.delete_push_config(task.id, "cfg-1")
            with pytest.raises(TaskNotFoundError):
                await b.get_push_config(task.id, "cfg-1")
            await b.delete_push_config(task.id, "cfg-1")
            assert [c.id for c in (await b.list_push_configs(task.id)).configs] == [generated.id]
            # A URL into a private network is refused, with the reason.
            with pytest.raises(InvalidParamsError) as refused:
                await b.create_push_config(task.id, url="http://10.0.0.1/hook")
            assert "10.0.0.1 is a private address" in str(refused.value), refused.value
            assert len((await b.list_push_configs(task.id)).configs) == 1
            # An unknown task.
            with pytest.raises(TaskNotFoundError):
                await b.create_push_config(str(uuid.uuid4()), config_id="c1")
        # Another tenant's task is not found, whatever the call.
        async with connect(other_url, other_key, combination) as other:
            with pytest.raises(TaskNotFoundError):
                await other.create_push_config(task.id, config_id="c2")
            with pytest.raises(TaskNotFoundError):
                await other.get_push_config(task.id, generated.id)
            with pytest.raises(TaskNotFoundError):
                await other.list_push_configs(task.id)
            with pytest.raises(TaskNotFoundError):
                await other.delete_push_config(task.id, generated.id)
        async with connect(url, key, combination) as b:
            assert await b.get_push_config(task.id, generated.id) == generated

    asyncio.run(scenario())


def test_push_configs_of_an_agent_without_push_are_not_supported(deploy, combination):
    url, key = deploy(push_notifications=False)

    async def scenario() -> None:
        async with connect(url, key, combination) as b:
            card = await b.extended_card()
            assert not card.capabilities.push_notifications
            task = await b.send(user_message("x", mid()))
            calls = {
                "create": lambda: b.create_push_config(task.id, config_id="c1"),
                "get": lambda: b.get_push_config(task.id, "c1"),
                "list": lambda: b.list_push_configs(task.id),
                "delete": lambda: b.delete_push_config(task.id, "c1"),
            }
            for what, call in calls.items():
                with pytest.raises(PushNotificationNotSupportedError) as refused:
                    await call()
                assert "push notifications" in str(refused.value), (what, refused.value)

    asyncio.run(scenario())


# --- one task, read through every combination ---------------------------------------------------


def test_a_task_reads_the_same_through_every_binding(deploy, combination):
    """Created through one combination, then read through all six: the same task, history
    window, list page, event log (ids included) and extended card, as v1.0 protos. A reading
    combination shows what it can (CANNOT_READ says what not, and why)."""
    url, key = deploy(input_required=True)

    async def scenario() -> dict[tuple[str, str], dict[str, Any]]:
        async with connect(url, key, combination) as b:
            first = await b.send(user_message("first", mid()))
            follow_up = user_message("second", mid(), task_id=first.id, context_id=first.context_id)
            assert (await b.send(follow_up)).status.state == COMPLETED
        views = {}
        for other in ALL_COMBINATIONS:
            cannot = CANNOT_READ.get(other, {})
            async with connect(url, key, other) as o:

                async def event_log(o: Binding = o) -> Any:
                    replay = await o.raw_subscribe(first.id, last_event_id=f"{first.id}:0")
                    return [(f.id, MessageToDict(f.response)) for f in replay]

                async def extended_card(o: Binding = o) -> Any:
                    card = await o.extended_card()
                    del card.supported_interfaces[:]  # a v0.3 card tags every interface 0.3
                    # Signed per process and as each version carries the card: compared in
                    # tests/e2e/test_card_signatures.py, by verifying them.
                    del card.signatures[:]
                    return MessageToDict(card)

                reads: dict[str, Callable[[], Awaitable[Any]]] = {
                    "get": lambda o=o: o.get(first.id),
                    "raw get": lambda o=o: o.raw_get(first.id),
                    "get, historyLength 2": lambda o=o: o.get(first.id, history_length=2),
                    "list": lambda o=o: o.list_tasks(
                        context_id=first.context_id, include_artifacts=True
                    ),
                    "list without artifacts": lambda o=o: o.list_tasks(context_id=first.context_id),
                    "event log": event_log,
                    "extended card": extended_card,
                }
                assert set(cannot) <= set(reads)
                views[other] = {}
                for what, read in reads.items():
                    if what not in cannot:
                        value = await read()
                        if not isinstance(value, (dict, list)):
                            value = MessageToDict(value)
                        views[other][what] = value
        return views

    views = asyncio.run(scenario())
    reference = views[ALL_COMBINATIONS[0]]
    assert ALL_COMBINATIONS[0] not in CANNOT_READ
    assert reference["get"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert len(reference["get"]["history"]) == 3 and len(reference["event log"]) > 3
    for other, view in views.items():
        assert set(view) | set(CANNOT_READ.get(other, {})) == set(reference), other
        for what, value in view.items():
            assert value == reference[what], f"{what} through {other}"
