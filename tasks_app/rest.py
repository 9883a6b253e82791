"""The HTTP+JSON (REST) binding: v1.0 paths under the agent root, v0.3 paths under `v1/`.

One async DRF view per operation (adrf: a sync view would hold a blocked thread for as long as
a blocking send lasts, and could not notice a client leaving a stream). A view parses with its
dialect's codec, calls the operation every binding calls, and renders with the codec. Errors are
`google.rpc.Status` bodies (spec 11.6) with the spec's HTTP status; v0.3 bodies also carry the
`type` and `message` that the v0.3 REST clients read.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import proto_utils as proto03
from a2a.types import AgentCard as AgentCardProto
from a2a.types import (
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    TaskPushNotificationConfig,
)
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from a2a.utils.error_handlers import build_rest_error_payload
from adrf.views import APIView
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponse, StreamingHttpResponse
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage
from rest_framework import exceptions as drf_exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agents.auth import caller_resolve, credentials_from_headers
from agents.errors import AgentNotFound, AuthenticationRequired

from . import dialects
from .dialects import V0_1, V0_3, V1_0
from .errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
    http_status,
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
from .sse import SseStream, sse_response
from .streams import StreamItem
from .wire import BadJson, contains_nul, json_loads

logger = logging.getLogger(__name__)

P = TypeVar("P", bound=ProtoMessage)

A2A_JSON = "application/a2a+json"


# --- content types ------------------------------------------------------------------------


class JsonBodyParser(BaseParser):
    """JSON bodies, read with the limits every binding applies (size, NaN, NUL)."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise BodyTooLarge(f"The request body exceeds {limit} bytes.")
        try:
            body = json_loads(raw)
        except BadJson as exc:
            raise InvalidRequestError(str(exc)) from None
        if contains_nul(body):
            raise InvalidParamsError("Strings in the body must not contain U+0000 (NUL).")
        return body


class A2AJsonBodyParser(JsonBodyParser):
    media_type = A2A_JSON


class A2AJsonRenderer(JSONRenderer):
    media_type = A2A_JSON


class AnswerInKind(BaseContentNegotiation):
    """`application/a2a+json` when the client asks for it (Accept, or else its own
    Content-Type), otherwise `application/json`. Never 406: an SSE client's
    `Accept: text/event-stream` must not stop a stream, and errors are always JSON."""

    def select_parser(self, request: Any, parsers: list[BaseParser]) -> BaseParser | None:
        content_type = (request.content_type or "").split(";")[0].strip().lower()
        if not content_type:
            return parsers[0]  # a JSON body sent without a Content-Type is still JSON
        return next((p for p in parsers if p.media_type == content_type), None)

    def select_renderer(
        self, request: Any, renderers: list[Any], format_suffix: str | None = None
    ) -> tuple[Any, str]:
        accept = request.META.get("HTTP_ACCEPT", "")
        content_type = request.META.get("CONTENT_TYPE", "")
        wants_a2a = A2A_JSON in accept or (A2A_JSON in content_type and "json" not in accept)
        media_type = A2A_JSON if wants_a2a else "application/json"
        renderer = next(r for r in renderers if r.media_type == media_type)
        return renderer, media_type


class BodyTooLarge(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- error bodies -------------------------------------------------------------------------


def _status_body(code: int, status: str, message: str, reason: str, dialect: str) -> dict[str, Any]:
    """An error the A2A table does not cover (no key, no agent, wrong method, too large), in
    the same google.rpc.Status shape as the A2A errors."""
    body: dict[str, Any] = {
        "error": {
            "code": code,
            "status": status,
            "message": message,
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": "a2a-protocol.org",
                    "metadata": {},
                }
            ],
        }
    }
    if dialect == V0_3:
        body.update(type=reason.title().replace("_", ""), message=message)
    return body


def error_body(error: A2AError, dialect: str, status: int | None = None) -> dict[str, Any]:
    body = build_rest_error_payload(error)
    if status is not None:  # an HTTP-level status the A2A error table does not know (415)
        body["error"]["code"] = status
    if dialect == V0_3:
        # v0.3 REST clients (the SDK's CompatRestTransport) read the error class name.
        body.update(type=type(error).__name__, message=error.message)
    return body


# --- codecs: one per dialect ------------------------------------------------------------


class Codec:
    """How one dialect's REST bodies and query strings map to the v1.0 protos and back."""

    version: ClassVar[str]

    def send_request(self, body: Any) -> SendMessageRequest:
        raise NotImplementedError

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        raise NotImplementedError

    def task(self, task: TaskProto) -> Any:
        raise NotImplementedError

    async def get(self, call: Caller, request: GetTaskRequest) -> Any:
        """GetTask's answer in this dialect."""
        return self.task(await get_task(call, request))

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        raise NotImplementedError

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        raise NotImplementedError

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        raise NotImplementedError

    def event(self, item: StreamItem) -> Any:
        raise NotImplementedError

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        """How one stream's items become events (a renderer may keep state per stream)."""
        return self.event

    def card(self, card: AgentCardProto) -> Any:
        raise NotImplementedError

    def push_create_request(self, task_id: str, body: Any) -> TaskPushNotificationConfig:
        """The config a POST tasks/{id}/pushNotificationConfigs body asks for, on the path's
        task: a body that names another task is invalid."""
        raise NotImplementedError

    def push_config(self, config: TaskPushNotificationConfig) -> Any:
        raise NotImplementedError

    def push_list_request(
        self, task_id: str, query: dict[str, Any]
    ) -> ListTaskPushNotificationConfigsRequest:
        request = ListTaskPushNotificationConfigsRequest(task_id=task_id)
        request.page_size = query.get("pageSize", 0)
        request.page_token = query.get("pageToken", "")
        request.tenant = query.get("tenant", "")
        return request

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        raise NotImplementedError

    def push_deleted(self) -> Any:
        """What DELETE answers: google.protobuf.Empty in both dialects."""
        return {}

    # The typed query parameters of GET /tasks, as this dialect names them.
    list_query: ClassVar[dict[str, type]]
    # ... and of GET tasks/{id}/pushNotificationConfigs.
    push_list_query: ClassVar[dict[str, type]] = {
        "pageSize": int,
        "pageToken": str,
        "tenant": str,
    }


# GET tasks' query parameters in both dialects; each adds its own timestamp filter.
_LIST_QUERY: dict[str, type] = {
    "contextId": str,
    "status": str,
    "pageSize": int,
    "pageToken": str,
    "historyLength": int,
    "includeArtifacts": bool,
}


def _proto_dict(message: ProtoMessage) -> dict[str, Any]:
    return MessageToDict(message)


class V10Codec(Codec):
    version = V1_0
    list_query = _LIST_QUERY | {"statusTimestampAfter": str}  # ISO 8601

    def send_request(self, body: Any) -> SendMessageRequest:
        return dialects.v10_params(_object(body), SendMessageRequest)

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        if isinstance(result, TaskProto):
            return _proto_dict(SendMessageResponse(task=result))
        return _proto_dict(SendMessageResponse(message=result))

    def task(self, task: TaskProto) -> Any:
        return _proto_dict(task)

    async def get(self, call: Caller, request: GetTaskRequest) -> Any:
        return await get_task(call, request, as_json=True)  # task()'s JSON, without the proto

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return request

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        return dialects.v10_params(query, ListTasksRequest)

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        return dialects.v10_list_result(request, response)

    def event(self, item: StreamItem) -> Any:
        return _proto_dict(item.response)

    def card(self, card: AgentCardProto) -> Any:
        return _proto_dict(card)

    def push_create_request(self, task_id: str, body: Any) -> TaskPushNotificationConfig:
        config = dialects.v10_params(_object(body), TaskPushNotificationConfig)
        if config.task_id not in ("", task_id):
            raise InvalidParamsError(
                f"The body names task {config.task_id[:100]!r} but the path names {task_id!r}."
            )
        config.task_id = task_id
        return config

    def push_config(self, config: TaskPushNotificationConfig) -> Any:
        return _proto_dict(config)

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        return _proto_dict(response)


class V03Codec(Codec):
    """v0.3 REST speaks the JSON form of the v0.3 protos (`a2a.v1` in the SDK's compat
    package); the SDK converts between them and its v0.3 models, which convert to v1.0."""

    version = V0_3
    list_query = _LIST_QUERY | {"lastUpdatedAfter": int}  # epoch milliseconds

    def send_request(self, body: Any) -> SendMessageRequest:
        return dialects.v03pb_send_request(_v03_proto(_object(body), pb03.SendMessageRequest))

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        return _proto_dict(dialects.v03pb_send_result(result))

    def task(self, task: TaskProto) -> Any:
        return _proto_dict(dialects.v03pb_task(task))

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        return dialects.v03pb_get_request(task_id, history_length)

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        return dialects.v03_convert("tasks", dialects.v03_list_request, query)

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        # v0.3's proto has no ListTasksResponse: the JSON-RPC result's shape, v0.3 proto tasks.
        tasks = [self.task(task) for task in response.tasks]
        if not request.include_artifacts:
            for task in tasks:
                task.pop("artifacts", None)
        return {
            "tasks": tasks,
            "totalSize": response.total_size,
            "pageSize": response.page_size,
            "nextPageToken": response.next_page_token,
        }

    def event(self, item: StreamItem) -> Any:
        return _proto_dict(dialects.v03pb_event(item.response, final=item.final))

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        events = dialects.V03StreamEvents()  # see there: how a v0.3 stream ends

        def render(item: StreamItem) -> Any:
            return [
                _proto_dict(proto03.ToProto.stream_response(event))
                for event in events(item.response, final=item.final)
            ]

        return render

    def card(self, card: AgentCardProto) -> Any:
        return _proto_dict(dialects.v03pb_card(card))

    def push_create_request(self, task_id: str, body: Any) -> TaskPushNotificationConfig:
        # v0.3's CreateTaskPushNotificationConfigRequest: `parent` (tasks/{id}), `configId`
        # and the `config`; the SDK's v0.3 client sends them in their proto field names.
        request = _v03_proto(_object(body), pb03.CreateTaskPushNotificationConfigRequest)
        parent = f"tasks/{task_id}"
        if request.parent not in ("", parent):
            raise InvalidParamsError(
                f"The body's parent {request.parent[:100]!r} is not this path's task ({parent!r})."
            )
        request.parent = parent
        return dialects.v03pb_push_config_request(request)

    def push_config(self, config: TaskPushNotificationConfig) -> Any:
        return _proto_dict(dialects.v03pb_push_config(config))

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        # v0.3's ListTaskPushNotificationConfigResponse, `configs` present even when empty.
        result: dict[str, Any] = {
            "configs": [self.push_config(config) for config in response.configs]
        }
        if response.next_page_token:
            result["nextPageToken"] = response.next_page_token
        return result


CODECS: dict[str, Codec] = {V1_0: V10Codec(), V0_3: V03Codec()}

_WHERE_VERSIONS_LIVE = {
    V1_0: "REST 1.0 is served directly under the agent's URL.",
    V0_3: "REST 0.3 is served under the agent's v1/ path.",
    V0_1: "0.1 has no REST binding; send it to the agent's JSON-RPC endpoint.",
}


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequestError("The body must be a JSON object.")
    return body


def _v03_proto(body: dict[str, Any], message_type: type[P]) -> P:
    try:
        known = dialects.known_fields(body, message_type.DESCRIPTOR)
        return ParseDict(known, message_type())
    except (ParseError, ValueError, RecursionError) as exc:
        raise InvalidParamsError(f"Invalid body for {message_type.__name__}: {exc}") from None


_INT32 = (-(2**31), 2**31 - 1)
# Integer query parameters and the values their proto fields can hold (lastUpdatedAfter: epoch
# milliseconds up to year 9999, what a protobuf Timestamp holds).
_INT_RANGE = defaultdict(lambda: _INT32, {"lastUpdatedAfter": (0, 253402300799999)})


def _typed_query(request: Request, spec: dict[str, type]) -> dict[str, Any]:
    """The query parameters this operation knows, typed; a bad value names its parameter."""
    values: dict[str, Any] = {}
    for name, kind in spec.items():
        raw = request.query_params.get(name)
        if raw is None:
            continue
        if kind is int:
            try:
                values[name] = int(raw)
            except ValueError:
                raise InvalidParamsError(
                    f"Query parameter {name!r} must be an integer, got {raw[:40]!r}."
                ) from None
            if not _INT_RANGE[name][0] <= values[name] <= _INT_RANGE[name][1]:
                raise InvalidParamsError(f"Query parameter {name!r} is out of range: {raw[:40]}.")
        elif kind is bool:
            if raw not in ("true", "false"):
                raise InvalidParamsError(
                    f"Query parameter {name!r} must be 'true' or 'false', got {raw[:40]!r}."
                )
            values[name] = raw == "true"
        else:
            if "\x00" in raw:
                raise InvalidParamsError(f"Query parameter {name!r} must not contain U+0000.")
            values[name] = raw
    return values


# --- the views ----------------------------------------------------------------------------


class A2AView(APIView):
    """What every REST operation shares: the agent, the dialect, the caller, the errors."""

    authentication_classes: ClassVar[list[Any]] = []
    permission_classes: ClassVar[list[Any]] = []
    throttle_classes: ClassVar[list[Any]] = []
    parser_classes: ClassVar[list[Any]] = [JsonBodyParser, A2AJsonBodyParser]
    renderer_classes: ClassVar[list[Any]] = [JSONRenderer, A2AJsonRenderer]
    content_negotiation_class = AnswerInKind
    metadata_class = None  # OPTIONS is not an A2A operation
    # Set per URL (as_view(dialect=...)): the path decides the dialect.
    dialect: str = V1_0

    @property
    def allowed_methods(self) -> list[str]:
        return [m for m in super().allowed_methods if m != "OPTIONS"]

    @property
    def codec(self) -> Codec:
        return CODECS[self.dialect]

    async def async_dispatch(self, request: Any, *args: Any, **kwargs: Any) -> HttpResponse:
        """adrf's dispatch, with `initial()` run in the event loop: here it only negotiates
        the content type (no authenticators, permissions or throttles), so the thread hop adrf
        makes for it would be a cost on every call and nothing else."""
        self.args, self.kwargs = args, kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            self.initial(request, *args, **kwargs)
            name = request.method.lower()
            handler = (
                getattr(self, name, self.http_method_not_allowed)
                if name in self.http_method_names
                else self.http_method_not_allowed
            )
            response = handler(request, *args, **kwargs)  # the A2A operations are async
            if inspect.isawaitable(response):
                response = await response
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(request, response, *args, **kwargs)
        return self.response

    async def caller(self, request: Request) -> Caller:
        self._check_version(request)
        slugs = {"tenant_slug": self.kwargs["tenant_slug"], "agent_slug": self.kwargs["agent_slug"]}
        try:
            raw_key = credentials_from_headers({k.lower(): v for k, v in request.headers.items()})
        except AuthenticationRequired as refused:
            with contextlib.suppress(AuthenticationRequired):
                await caller_resolve(**slugs, raw_key=None)  # an unknown agent is still a 404
            raise refused
        # From this process's cache of agents and keys when fresh (agents.cache).
        agent, principal = await caller_resolve(**slugs, raw_key=raw_key)
        return Caller(
            agent=agent,
            principal=principal,
            last_event_id=request.headers.get("Last-Event-ID"),
            extensions=requested_extensions(request.headers.get("A2A-Extensions")),
            dialect=self.dialect,
        )

    def _check_version(self, request: Request) -> None:
        """The path names the version; an `A2A-Version` sent with it must agree."""
        header = request.headers.get("A2A-Version") or request.query_params.get("A2A-Version")
        if not header:
            return
        spoken = dialects.dialect_of(header, None)
        if spoken != self.dialect:
            raise VersionNotSupportedError(
                f"A2A-Version {spoken} does not match this path, which speaks {self.dialect}; "
                + _WHERE_VERSIONS_LIVE[spoken]
            )

    def body(self, request: Request) -> Any:
        """The JSON body, or an empty object when there is none."""
        if request.stream is None and "Transfer-Encoding" not in request.headers:
            return {}
        if request.stream is None:
            # DRF reads a body only when Content-Length says there is one; a chunked body has
            # none, so hand DRF the request itself to read from.
            request._stream = request._request
        return request.data

    def stream(self, stream: SseStream) -> StreamingHttpResponse:
        dialect = self.dialect
        return sse_response(
            stream, wrap=lambda result: result, error_body=lambda e: error_body(e, dialect)
        )

    def handle_exception(self, exc: Exception) -> HttpResponse:
        if isinstance(exc, A2AError):
            return Response(error_body(exc, self.dialect), status=http_status(exc))
        if isinstance(exc, drf_exceptions.UnsupportedMediaType):
            error = ContentTypeNotSupportedError(
                f"Content-Type {self.request.content_type!r} is not supported; "
                f"send application/json or {A2A_JSON}."
            )
            return Response(error_body(error, self.dialect, 415), status=415)
        headers: dict[str, str] = {}
        if isinstance(exc, AuthenticationRequired):
            code, status, reason = 401, "UNAUTHENTICATED", exc.reason
            headers["WWW-Authenticate"] = 'Bearer realm="a2a", charset="UTF-8"'
            message = exc.message
        elif isinstance(exc, AgentNotFound):
            code, status, reason, message = 404, "NOT_FOUND", "AGENT_NOT_FOUND", exc.message
        elif isinstance(exc, BodyTooLarge):
            code, status, reason, message = 413, "INVALID_ARGUMENT", "INVALID_REQUEST", exc.message
        elif isinstance(exc, drf_exceptions.MethodNotAllowed):
            headers["Allow"] = ", ".join(self.allowed_methods)
            message = f"{self.request.method} is not allowed here; use {headers['Allow']}."
            code, status, reason = 405, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED"
        elif isinstance(exc, drf_exceptions.APIException | SuspiciousOperation):
            # e.g. more query parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS
            code, status, reason = 400, "INVALID_ARGUMENT", "INVALID_REQUEST"
            message = str(getattr(exc, "detail", exc)) or "The request is malformed."
        else:
            logger.exception("Unhandled error in %s %s", self.request.method, self.request.path)
            error = InternalError("The server failed to process this request; it has been logged.")
            return Response(error_body(error, self.dialect), status=500)
        return Response(
            _status_body(code, status, message, reason, self.dialect), status=code, headers=headers
        )


class SendMessageView(A2AView):
    async def post(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        send_request = self.codec.send_request(self.body(request))
        result = await send_message(call, send_request)
        return Response(self.codec.send_result(result))


class SendStreamingMessageView(A2AView):
    async def post(self, request: Request, **kwargs: Any) -> HttpResponse:
        call = await self.caller(request)
        send_request = self.codec.send_request(self.body(request))
        stream = await send_message_stream(call, send_request)
        return self.stream(SseStream(stream, self.codec.stream_renderer()))


class TaskView(A2AView):
    async def get(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        query = _typed_query(request, {"historyLength": int, "tenant": str})
        get_request = self.codec.get_request(task_id, query.get("historyLength"))
        get_request.tenant = query.get("tenant", "")
        return Response(await self.codec.get(call, get_request))


class TaskListView(A2AView):
    async def get(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        list_request = self.codec.list_request(_typed_query(request, self.codec.list_query))
        list_request.tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        return Response(self.codec.list_result(list_request, await list_tasks(call, list_request)))


class CancelTaskView(A2AView):
    async def post(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        body = _object(self.body(request))
        tenant = body.get("tenant", "")
        if not isinstance(tenant, str):
            raise InvalidParamsError("'tenant' must be a string.")
        if body.get("id") not in (None, "", task_id):
            raise InvalidParamsError(
                f"The body names task {str(body['id'])[:100]!r} but the path names {task_id!r}."
            )
        return Response(self.codec.task(await cancel_task(call, task_id, tenant=tenant)))


class SubscribeView(A2AView):
    # Not HEAD: Django would answer it with GET, opening a real subscription.
    http_method_names: ClassVar[list[str]] = ["get", "post"]

    async def get(self, request: Request, task_id: str, **kwargs: Any) -> HttpResponse:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        stream = await subscribe_to_task(call, task_id, call.last_event_id, tenant=tenant)
        return self.stream(SseStream(stream, self.codec.stream_renderer()))

    async def post(self, request: Request, task_id: str, **kwargs: Any) -> HttpResponse:
        return await self.get(request, task_id, **kwargs)


def _config_id(config_id: str) -> str:
    if "\x00" in config_id:  # what the database cannot even compare
        raise InvalidParamsError("The config id must not contain U+0000.")
    return config_id


class PushConfigsView(A2AView):
    """A task's push notification configs: create one (POST), list them (GET)."""

    http_method_names: ClassVar[list[str]] = ["get", "post"]

    async def post(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        config = self.codec.push_create_request(task_id, self.body(request))
        created = await create_push_config(call, config)
        return Response(self.codec.push_config(created))

    async def get(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        query = _typed_query(request, self.codec.push_list_query)
        list_request = self.codec.push_list_request(task_id, query)
        return Response(self.codec.push_list_result(await list_push_configs(call, list_request)))


class PushConfigView(A2AView):
    """One push notification config: get it, delete it."""

    http_method_names: ClassVar[list[str]] = ["get", "delete"]

    async def get(self, request: Request, task_id: str, config_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        config = await get_push_config(call, task_id, _config_id(config_id), tenant=tenant)
        return Response(self.codec.push_config(config))

    async def delete(
        self, request: Request, task_id: str, config_id: str, **kwargs: Any
    ) -> Response:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        await delete_push_config(call, task_id, _config_id(config_id), tenant=tenant)
        return Response(self.codec.push_deleted())


class ExtendedCardView(A2AView):
    async def get(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        return Response(self.codec.card(await get_extended_card(call)))


class UnknownPathView(A2AView):
    """Any other path under an agent's REST roots: a Status body, not Django's HTML page."""

    schema = None  # not an operation: kept out of the OpenAPI description

    async def not_found(self, request: Request, **kwargs: Any) -> Response:
        raise MethodNotFoundError(
            f"{request.method} {request.path} is not an A2A REST operation of this agent; see "
            "/api/docs/ for the paths (v1.0 under the agent's URL, v0.3 under its v1/)."
        )

    get = post = put = patch = delete = not_found
