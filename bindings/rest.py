"""The HTTP+JSON (REST) binding: v1.0 paths under the agent root, v0.3 paths under `v1/`.

One async DRF view per operation (adrf: a sync view would hold a blocked thread for as long as
a blocking send lasts, and could not notice a client leaving a stream). A view parses with its
dialect's codec, calls the operation every binding calls, and renders with the codec. Errors are
`google.rpc.Status` bodies (spec 11.6) with the spec's HTTP status; v0.3 bodies also carry the
`type` and `message` that the v0.3 REST clients read. REST v0.3 reads and answers several
wire spellings (bindings.codecs.spellings): a body's own, else the task creator's, else
proto-JSON, unless `?spelling=` names one.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any, ClassVar, Literal, TypeVar

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import AgentCard as AgentCardProto
from a2a.types import (
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    TaskPushNotificationConfig,
)
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from adrf.views import APIView
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import Resolver404, resolve
from django.views.defaults import page_not_found
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage
from rest_framework import exceptions as drf_exceptions
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from a2a_platform.versions import V0_3, V1_0
from agents.errors import RequestError
from push_app.operations import (
    push_config_create,
    push_config_delete,
    push_config_get,
    push_config_list,
)
from tasks_app.errors import InvalidParamsError, InvalidRequestError, MethodNotFoundError
from tasks_app.operations import (
    Caller,
    extended_card_get,
    message_send,
    message_stream,
    task_cancel,
    task_get,
    task_list,
    task_origin,
    task_subscribe,
)
from tasks_app.streams import StreamItem

from .callers import admitted, http_caller, http_identify, version_check
from .codecs import spellings, v03, v10
from .errors import (
    BodyTooLarge,
    MethodNotAllowed,
    UnsupportedMediaType,
    jsonrpc_error,
    problem_of,
    rest_body,
)
from .jsonrpc import agent_jsonrpc
from .sse import SseStream, sse_response
from .wire import BadJson, json_loads, unstorable_text

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
        if problem := unstorable_text(body):
            raise InvalidParamsError(f"Strings in the body {problem}.")
        return body


class A2AJsonBodyParser(JsonBodyParser):
    media_type = A2A_JSON


class NullableJSONRenderer(JSONRenderer):
    """JSON, with `None` written as `null` (DRF writes an empty body): v0.3 JSON answers
    DELETE with `null`."""

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        if data is None:
            return b"null"
        return super().render(data, accepted_media_type, renderer_context)


class A2AJsonRenderer(NullableJSONRenderer):
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


# --- each dialect's REST forms -----------------------------------------------------------------


class RestDialect:
    """What REST adds to a dialect's codec (bindings.codecs): bodies and query strings in, and
    answers out, in this dialect's REST JSON. v0.3 has several wire spellings
    (bindings.codecs.spellings), one RestDialect each; v1.0 has one."""

    version: ClassVar[str]
    # The wire spelling (v0.3), kept with a task the request creates (Caller.spelling).
    spelling: ClassVar[str] = ""

    def spelled(self, spelling: str) -> RestDialect:
        """This dialect in `spelling` ("" or one not known: its default)."""
        return self

    def send_dialect(self, body: Any, asked: str) -> RestDialect:
        """The spelling a SendMessage body is written in; `asked`: what `?spelling=` names."""
        return self

    async def push_create_dialect(
        self, call: Caller, task_id: str, body: Any, asked: str
    ) -> RestDialect:
        """The spelling a push config create body is written in."""
        return self

    def send_request(self, body: Any) -> SendMessageRequest:
        raise NotImplementedError

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        raise NotImplementedError

    def task(self, task: TaskProto) -> Any:
        raise NotImplementedError

    async def get(self, call: Caller, request: GetTaskRequest, asked: str) -> Any:
        """GetTask's answer in this dialect."""
        return self.task(await task_get(caller=call, request=request))

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        raise NotImplementedError

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        raise NotImplementedError

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        raise NotImplementedError

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        """How one stream's items become events (a renderer may keep state per stream)."""
        raise NotImplementedError

    def card(self, card: AgentCardProto) -> Any:
        raise NotImplementedError

    def push_create_request(
        self, task_id: str, body: Any, config_id: str = ""
    ) -> TaskPushNotificationConfig:
        """The config a POST tasks/{id}/pushNotificationConfigs body asks for, on the path's
        task: a body that names another task is invalid. `config_id`: the `configId` query
        parameter (the draft's transcoding)."""
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
        """What DELETE answers: google.protobuf.Empty in both dialects' protos."""
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


class RestV10(RestDialect):
    """v1.0 REST speaks the v1.0 protos' JSON, as JSON-RPC does."""

    version = V1_0
    list_query = _LIST_QUERY | {"statusTimestampAfter": str}  # ISO 8601

    def send_request(self, body: Any) -> SendMessageRequest:
        return v10.v10_params(_object(body), SendMessageRequest)

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        return v10.to_json(v10.send_result(result))

    def task(self, task: TaskProto) -> Any:
        return v10.to_json(task)

    async def get(self, call: Caller, request: GetTaskRequest, asked: str) -> Any:
        return await task_get(caller=call, request=request, as_json=True)  # without the proto

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        request = GetTaskRequest(id=task_id)
        if history_length is not None:
            request.history_length = history_length
        return request

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        return v10.v10_params(query, ListTasksRequest)

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        return v10.v10_list_result(request, response)

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        return v10.stream_json

    def card(self, card: AgentCardProto) -> Any:
        return v10.to_json(card)

    def push_create_request(
        self, task_id: str, body: Any, config_id: str = ""
    ) -> TaskPushNotificationConfig:
        config = v10.v10_params(_object(body), TaskPushNotificationConfig)
        if config.task_id not in ("", task_id):
            raise InvalidParamsError(
                f"The body names task {config.task_id[:100]!r} but the path names {task_id!r}."
            )
        config.task_id = task_id
        return config

    def push_config(self, config: TaskPushNotificationConfig) -> Any:
        return v10.to_json(config)

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        return v10.to_json(response)


class RestV03(RestDialect):
    """v0.3 REST in its default spelling, the JSON form of the v0.3 protos (`a2a.v1` in the
    SDK's compat package): the v0.3 codec's "proto_json" form, what the SDK's v0.3 REST client
    speaks. The other spellings are subclasses; `spelled` picks one."""

    version = V0_3
    spelling = spellings.PROTO_JSON
    form: ClassVar[Literal["json", "proto_json"]] = "proto_json"
    list_query = _LIST_QUERY | {"lastUpdatedAfter": int}  # epoch milliseconds

    def spelled(self, spelling: str) -> RestDialect:
        return V03_SPELLED.get(spelling) or V03_SPELLED[spellings.DEFAULT]

    def send_dialect(self, body: Any, asked: str) -> RestDialect:
        fits = spellings.resolve(spellings.send_clues(_object(body)), asked)
        return self.spelled(spellings.preferred(fits))

    async def push_create_dialect(
        self, call: Caller, task_id: str, body: Any, asked: str
    ) -> RestDialect:
        """A body that fits spellings whose answers differ (`{"pushNotificationConfig": ...}`
        is both v0.3 JSON's and the draft's) answers in the task's creator's spelling."""
        fits = spellings.resolve(spellings.push_create_clues(_object(body)), asked)
        if len(fits) > 1 and not fits <= {spellings.PROTO_JSON, spellings.MAPPING}:
            origin = await task_origin(caller=call, task_id=task_id)
            if origin is not None and origin.spelling in fits:
                return self.spelled(origin.spelling)
        return self.spelled(spellings.preferred(fits))

    def send_request(self, body: Any) -> SendMessageRequest:
        return v03.v03pb_send_request(_v03_proto(_object(body), pb03.SendMessageRequest))

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        return v03.send_result(result, self.form)

    def task(self, task: TaskProto) -> Any:
        return v03.task_out(task, self.form)

    async def get(self, call: Caller, request: GetTaskRequest, asked: str) -> Any:
        """In the spelling asked for, else the one the task's creator used (read with the
        task, no query more)."""
        task, origin = await task_get(caller=call, request=request, with_origin=True)
        return self.spelled(asked or origin.spelling).task(task)

    def get_request(self, task_id: str, history_length: int | None) -> GetTaskRequest:
        return v03.v03pb_get_request(task_id, history_length)

    def list_request(self, query: dict[str, Any]) -> ListTasksRequest:
        return v03.v03_convert("tasks", v03.v03_list_request, query)

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        return v03.list_result(request, response, self.form)

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        return v03.stream_renderer(self.form)

    def card(self, card: AgentCardProto) -> Any:
        return v03.card_out(card, self.form)

    def push_create_request(
        self, task_id: str, body: Any, config_id: str = ""
    ) -> TaskPushNotificationConfig:
        # v0.3's CreateTaskPushNotificationConfigRequest: `parent` (tasks/{id}), `configId`
        # and the `config`; the SDK's v0.3 client sends them in their proto field names.
        request = _v03_proto(_object(body), pb03.CreateTaskPushNotificationConfigRequest)
        parent = f"tasks/{task_id}"
        if request.parent not in ("", parent):
            raise InvalidParamsError(
                f"The body's parent {request.parent[:100]!r} is not this path's task ({parent!r})."
            )
        request.parent = parent
        return v03.v03pb_push_config_request(request)

    def push_config(self, config: TaskPushNotificationConfig) -> Any:
        return v03.push_config_out(config, self.form)

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        # v0.3's ListTaskPushNotificationConfigResponse, `configs` present even when empty.
        result: dict[str, Any] = {
            "configs": [self.push_config(config) for config in response.configs]
        }
        if response.next_page_token:
            result["nextPageToken"] = response.next_page_token
        return result


class RestV03Json(RestV03):
    """v0.3's JSON objects (the v0.3 specification's REST section, the v0.3 endpoint summary):
    JSON-RPC v0.3's params and results without the JSON-RPC envelope. SendMessage answers the
    bare Task or Message, stream events are the bare events (`kind` tells them apart), the
    push config list is an array and DELETE answers `null`, as the endpoint summary gives."""

    spelling = spellings.JSON
    form = "json"

    def send_request(self, body: Any) -> SendMessageRequest:
        return v03.v03json_send_request(_object(body))

    def push_create_request(
        self, task_id: str, body: Any, config_id: str = ""
    ) -> TaskPushNotificationConfig:
        body = _object(body)
        named = body.get("taskId", body.get("task_id"))
        if named not in (None, "", task_id):
            raise InvalidParamsError(
                f"The body names task {str(named)[:100]!r} but the path names {task_id!r}."
            )
        params = {k: v for k, v in body.items() if k not in ("taskId", "task_id")}
        return v03.v03json_push_config_request({**params, "taskId": task_id})

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        return [self.push_config(config) for config in response.configs]

    def push_deleted(self) -> Any:
        return None


class RestV03Draft(RestV03):
    """The earlier v1 draft (its proto and JSON Schema): the v0.3 protos' JSON with a
    message's `parts` (not `content`), files' `mediaType` (not `mimeType`), a send's
    `pushNotificationConfig` (not `pushNotification`), and the bare config as a push config
    create body. Read by renaming into proto-json, answered by renaming back."""

    spelling = spellings.DRAFT

    def send_request(self, body: Any) -> SendMessageRequest:
        renamed, references = spellings.draft_send_body(_object(body))
        request = super().send_request(renamed)
        request.message.reference_task_ids.extend(references)
        return request

    def send_result(self, result: TaskProto | MessageProto) -> Any:
        return spellings.draft_event(super().send_result(result))

    def task(self, task: TaskProto) -> Any:
        return spellings.draft_task(super().task(task))

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        result = super().list_result(request, response)
        return {**result, "tasks": [spellings.draft_task(task) for task in result["tasks"]]}

    def stream_renderer(self) -> Callable[[StreamItem], Any]:
        render = super().stream_renderer()
        return lambda item: [spellings.draft_event(event) for event in render(item)]

    def card(self, card: AgentCardProto) -> Any:
        return spellings.draft_card(super().card(card))

    def push_create_request(
        self, task_id: str, body: Any, config_id: str = ""
    ) -> TaskPushNotificationConfig:
        renamed = spellings.draft_push_create_body(task_id, _object(body), config_id)
        return super().push_create_request(task_id, renamed)


class RestV03Mapping(RestV03):
    """The transport mapping table: proto-json bodies and answers, but its two list rows
    answer bare arrays (`[Task]`, `[TaskPushNotificationConfig]`): one page each."""

    spelling = spellings.MAPPING

    def list_result(self, request: ListTasksRequest, response: ListTasksResponse) -> Any:
        return super().list_result(request, response)["tasks"]

    def push_list_result(self, response: ListTaskPushNotificationConfigsResponse) -> Any:
        return [self.push_config(config) for config in response.configs]


V03_SPELLED: dict[str, RestV03] = {
    codec.spelling: codec for codec in (RestV03(), RestV03Json(), RestV03Draft(), RestV03Mapping())
}
DIALECTS: dict[str, RestDialect] = {V1_0: RestV10(), V0_3: V03_SPELLED[spellings.DEFAULT]}


def _object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise InvalidRequestError("The body must be a JSON object.")
    return body


def _v03_proto(body: dict[str, Any], message_type: type[P]) -> P:
    try:
        known = v10.known_fields(body, message_type.DESCRIPTOR)
        return ParseDict(known, message_type())
    except (ParseError, ValueError, RecursionError) as exc:
        raise InvalidParamsError(f"Invalid body for {message_type.__name__}: {exc}") from None


_INT32 = (-(2**31), 2**31 - 1)
# Integer query parameters and the values their proto fields can hold (lastUpdatedAfter: epoch
# milliseconds up to year 9999, what a protobuf Timestamp holds).
_INT_RANGE = defaultdict(lambda: _INT32, {"lastUpdatedAfter": (0, 253402300799999)})


# Where a JSON name's words meet, for its proto field name (`historyLength` -> `history_length`).
_PROTO_NAME = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _typed_query(request: Request, spec: dict[str, type]) -> dict[str, Any]:
    """The query parameters this operation knows, typed; a bad value names its parameter. As
    in HTTP/JSON transcoding, a parameter may be spelled as its proto field (`history_length`)
    or its JSON name (`historyLength`)."""
    values: dict[str, Any] = {}
    for name, kind in spec.items():
        raw = request.query_params.get(name)
        field = _PROTO_NAME.sub("_", name).lower()
        if field != name and (other := request.query_params.get(field)) is not None:
            if raw is not None and raw != other:
                raise InvalidParamsError(
                    f"Query parameters {name!r} and {field!r} are one parameter and differ; "
                    "send one of them."
                )
            raw = other
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
    renderer_classes: ClassVar[list[Any]] = [NullableJSONRenderer, A2AJsonRenderer]
    content_negotiation_class = AnswerInKind
    metadata_class = None  # OPTIONS is not an A2A operation
    # Set per URL (as_view(dialect=...)): the path decides the dialect.
    dialect: str = V1_0

    @property
    def allowed_methods(self) -> list[str]:
        return [m for m in super().allowed_methods if m != "OPTIONS"]

    @property
    def codec(self) -> RestDialect:
        return DIALECTS[self.dialect]

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
        """The caller (bindings.callers), admitted: within its request rates. The path names
        the version; an `A2A-Version` sent with it must agree."""
        version_check(
            request.headers.get("A2A-Version") or request.query_params.get("A2A-Version"),
            speaks=self.dialect,
            where="this path",
        )
        identified = await http_identify(
            tenant_slug=self.kwargs["tenant_slug"],
            agent_slug=self.kwargs["agent_slug"],
            headers=request.headers,
            source=request.META.get("REMOTE_ADDR") or "",
        )
        return await admitted(http_caller(identified, request.headers, dialect=self.dialect))

    def asked(self, request: Request) -> str:
        """The v0.3 spelling the request asks to be answered in (`?spelling=`), "" for none;
        v1.0 has one spelling."""
        if self.dialect != V0_3:
            return ""
        return spellings.asked(request.query_params.get("spelling"))

    async def task_dialect(self, call: Caller, request: Request, task_id: str) -> RestDialect:
        """A request without a body answers in the spelling it asks for, else in the one the
        request that created the task used (one query; v0.3 only)."""
        asked = self.asked(request)
        if asked or self.dialect != V0_3:
            return self.codec.spelled(asked)
        origin = await task_origin(caller=call, task_id=task_id)
        return self.codec.spelled(origin.spelling if origin is not None else "")

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
            stream,
            wrap=lambda result: result,
            error_body=lambda exc: rest_body(problem_of(exc), dialect),
        )

    def http_method_not_allowed(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        allow = self.allowed_methods
        raise MethodNotAllowed(
            f"{request.method} is not allowed here; use {', '.join(allow)}.", allow=allow
        )

    def handle_exception(self, exc: Exception) -> HttpResponse:
        problem = problem_of(_ours(exc, self.request))
        return Response(
            rest_body(problem, self.dialect), status=problem.http_status, headers=problem.headers
        )


def _ours(exc: Exception, request: Request) -> BaseException:
    """DRF's and Django's own refusals of a request, as the platform's errors."""
    if isinstance(exc, drf_exceptions.UnsupportedMediaType):
        return UnsupportedMediaType(
            f"Content-Type {request.content_type!r} is not supported; "
            f"send application/json or {A2A_JSON}."
        )
    if isinstance(exc, drf_exceptions.APIException):
        return RequestError(str(exc.detail) or "The request is malformed.")
    return exc  # Django's own refusals (SuspiciousOperation) are bindings.errors.problem_of's


def _spelled(call: Caller, codec: RestDialect) -> Caller:
    """The caller, carrying the spelling its request used: a task it creates keeps it."""
    return dataclasses.replace(call, spelling=codec.spelling) if codec.spelling else call


class SendMessageView(A2AView):
    async def post(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        body = self.body(request)
        codec = self.codec.send_dialect(body, self.asked(request))
        send_request = codec.send_request(body)
        result = await message_send(caller=_spelled(call, codec), request=send_request)
        return Response(codec.send_result(result))


class SendStreamingMessageView(A2AView):
    async def post(self, request: Request, **kwargs: Any) -> HttpResponse:
        call = await self.caller(request)
        body = self.body(request)
        codec = self.codec.send_dialect(body, self.asked(request))
        send_request = codec.send_request(body)
        stream = await message_stream(caller=_spelled(call, codec), request=send_request)
        return self.stream(SseStream(stream, codec.stream_renderer()))


class TaskView(A2AView):
    async def get(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        query = _typed_query(request, {"historyLength": int, "tenant": str})
        get_request = self.codec.get_request(task_id, query.get("historyLength"))
        get_request.tenant = query.get("tenant", "")
        return Response(await self.codec.get(call, get_request, self.asked(request)))


class TaskListView(A2AView):
    """No task to take a spelling from: the default, unless `?spelling=` asks for another."""

    async def get(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        codec = self.codec.spelled(self.asked(request))
        list_request = codec.list_request(_typed_query(request, codec.list_query))
        list_request.tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        response = await task_list(caller=call, request=list_request)
        return Response(codec.list_result(list_request, response))


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
        # v0.3's CancelTaskRequest (the mapping table's payload) names the task `tasks/{id}`.
        if self.dialect == V0_3 and body.get("name") not in (None, "", f"tasks/{task_id}"):
            raise InvalidParamsError(
                f"The body's name {str(body['name'])[:100]!r} is not this path's task "
                f"('tasks/{task_id}')."
            )
        asked = self.asked(request)
        task, origin = await task_cancel(
            caller=call, task_id=task_id, tenant=tenant, with_origin=True
        )
        return Response(self.codec.spelled(asked or origin.spelling).task(task))


class SubscribeView(A2AView):
    # Not HEAD: Django would answer it with GET, opening a real subscription.
    http_method_names: ClassVar[list[str]] = ["get", "post"]

    async def get(self, request: Request, task_id: str, **kwargs: Any) -> HttpResponse:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        codec = await self.task_dialect(call, request, task_id)
        stream = await task_subscribe(
            caller=call, task_id=task_id, last_event_id=call.last_event_id, tenant=tenant
        )
        return self.stream(SseStream(stream, codec.stream_renderer()))

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
        body = self.body(request)
        codec = await self.codec.push_create_dialect(call, task_id, body, self.asked(request))
        config_id = _typed_query(request, {"configId": str}).get("configId", "")
        config = codec.push_create_request(task_id, body, config_id)
        created = await push_config_create(caller=call, config=config)
        return Response(codec.push_config(created))

    async def get(self, request: Request, task_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        query = _typed_query(request, self.codec.push_list_query)
        list_request = self.codec.push_list_request(task_id, query)
        codec = await self.task_dialect(call, request, task_id)
        response = await push_config_list(caller=call, request=list_request)
        return Response(codec.push_list_result(response))


class PushConfigView(A2AView):
    """One push notification config: get it, delete it."""

    http_method_names: ClassVar[list[str]] = ["get", "delete"]

    async def get(self, request: Request, task_id: str, config_id: str, **kwargs: Any) -> Response:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        codec = await self.task_dialect(call, request, task_id)
        config = await push_config_get(
            caller=call, task_id=task_id, config_id=_config_id(config_id), tenant=tenant
        )
        return Response(codec.push_config(config))

    async def delete(
        self, request: Request, task_id: str, config_id: str, **kwargs: Any
    ) -> Response:
        call = await self.caller(request)
        tenant = _typed_query(request, {"tenant": str}).get("tenant", "")
        codec = await self.task_dialect(call, request, task_id)
        await push_config_delete(
            caller=call, task_id=task_id, config_id=_config_id(config_id), tenant=tenant
        )
        return Response(codec.push_deleted())


class ExtendedCardView(A2AView):
    async def get(self, request: Request, **kwargs: Any) -> Response:
        call = await self.caller(request)
        codec = self.codec.spelled(self.asked(request))
        return Response(codec.card(await extended_card_get(caller=call)))


class UnknownPathView(A2AView):
    """Any other path under an agent's REST roots: a Status body, not Django's HTML page."""

    schema = None  # not an operation: kept out of the OpenAPI description

    async def not_found(self, request: Request, **kwargs: Any) -> Response:
        raise MethodNotFoundError(
            f"{request.method} {request.path} is not an A2A REST operation of this agent; see "
            "/api/docs/ for the paths (v1.0 under the agent's URL, v0.3 under its v1/)."
        )

    get = post = put = patch = delete = not_found


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 404, for a path no pattern matches (a control character in it, a slug that
    cannot be one): under /a2a/ a Status body, as the REST paths answer, not Django's HTML page;
    elsewhere Django's own page."""
    if not request.path.startswith("/a2a/"):
        return page_not_found(request, exception)  # type: ignore[arg-type]
    problem = problem_of(
        MethodNotFoundError(
            f"{request.method} {request.path[:200]!r} is not a path of this platform: agents "
            "live at /a2a/<tenant>/<agent>/, with slugs of letters, digits and hyphens."
        )
    )
    return HttpResponse(
        json.dumps(rest_body(problem, V1_0)),
        status=problem.http_status,
        content_type="application/json",
    )


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Django's 400 under /a2a/ (a2a_platform.urls.bad_request sends it here), for a request
    refused before any view ran (a Host header the platform does not serve, which the
    middleware refuses with DisallowedHost): in the format of the binding at that path,
    JSON-RPC's envelope or REST's Status, not an HTML page."""
    problem = problem_of(
        InvalidRequestError(
            "The Host header names no host this platform serves."
            if isinstance(exception, DisallowedHost)
            else "The request is malformed."
        )
    )
    try:
        at_jsonrpc = resolve(request.path_info).func is agent_jsonrpc
    except Resolver404:
        at_jsonrpc = False
    body = (
        {"jsonrpc": "2.0", "id": None, "error": jsonrpc_error(problem)}
        if at_jsonrpc
        else rest_body(problem, V1_0)
    )
    return HttpResponse(json.dumps(body), status=400, content_type="application/json")
