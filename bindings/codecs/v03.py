"""The v0.3 codec: v0.3 JSON (the SDK's v0.3 models) and v0.3 protos <-> the v1.0 protos.

The services speak v1.0 protobuf only; v0.3 JSON is validated with the SDK's v0.3 models and
converted with its `a2a.compat.v0_3.conversions` on the way in and out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import proto_utils as proto03
from a2a.compat.v0_3 import types as v03
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from google.protobuf.json_format import MessageToDict, ParseError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from tasks_app.errors import InvalidParamsError
from tasks_app.streams import StreamItem

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


def v03_request(model: type[M], method: str, params: dict[str, Any]) -> M:
    """Validate v0.3 params with the SDK's v0.3 request model."""
    try:
        return model.model_validate({"jsonrpc": "2.0", "id": 0, "method": method, "params": params})
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'params'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidParamsError(f"Invalid params for {method}: {problems}") from None


def v03_convert(method: str, convert: Callable[[Any], T], value: Any) -> T:
    """Run a v0.3 -> v1.0 conversion. What v1.0 cannot hold (an int32 overflow, bad base64,
    an unpaired surrogate, nesting too deep) is the client's invalid params, not our fault."""
    try:
        return convert(value)
    except (ValueError, ParseError) as exc:
        raise InvalidParamsError(f"Invalid params for {method}: {exc}") from None


# The states a v0.3 list can filter on: `unknown` converts to v1.0's UNSPECIFIED, which means
# "no filter", so it would silently list every task.
_V03_STATES = {state.value: state for state in v03.TaskState if state != v03.TaskState.unknown}


def v03_list_request(params: dict[str, Any]) -> ListTasksRequest:
    """tasks/list (v0.3 ListTasksParams) has no SDK model: map its fields by hand."""
    request = ListTasksRequest()
    known = {
        "contextId",
        "status",
        "pageSize",
        "pageToken",
        "historyLength",
        "lastUpdatedAfter",
        "includeArtifacts",
        "metadata",
    }
    unknown = sorted(set(params) - known)
    if unknown:
        raise InvalidParamsError(f"Unknown tasks/list params: {', '.join(unknown)}.")
    if "contextId" in params:
        request.context_id = _typed(params, "contextId", str)
    if "status" in params:
        status = _typed(params, "status", str)
        if status not in _V03_STATES:
            raise InvalidParamsError(
                f"'status' {status!r} is not a task state; use one of {', '.join(_V03_STATES)}."
            )
        request.status = conversions.to_core_task_status(
            v03.TaskStatus(state=_V03_STATES[status])
        ).state
    if "pageSize" in params:
        request.page_size = _typed(params, "pageSize", int)
    if "pageToken" in params:
        request.page_token = _typed(params, "pageToken", str)
    if "historyLength" in params:
        request.history_length = _typed(params, "historyLength", int)
    if "lastUpdatedAfter" in params:
        millis = _typed(params, "lastUpdatedAfter", int)
        if millis < 0:
            raise InvalidParamsError("'lastUpdatedAfter' must be a non-negative epoch in ms.")
        request.status_timestamp_after.FromMilliseconds(millis)
    if "includeArtifacts" in params:
        request.include_artifacts = _typed(params, "includeArtifacts", bool)
    return request


def _typed(params: dict[str, Any], name: str, kind: type) -> Any:
    value = params[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidParamsError(f"'{name}' must be a {kind.__name__}, got {value!r}.")
    return value


def v03_dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


# --- v0.3 protos (REST's JSON bodies and gRPC's messages) <-> v1.0 ------------------------
# The SDK's proto_utils map the v0.3 protos to its v0.3 models, and its conversions map those
# to v1.0; these compose the two, so REST v0.3 and gRPC v0.3 convert in one place.


def _v03_proto_convert(what: str, convert: Callable[[Any], T], value: Any) -> T:
    """What the v0.3 models refuse (a missing field, a bad enum) is the client's invalid
    params, named, not our failure."""
    try:
        return v03_convert(what, convert, value)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'request'}: {err['msg']}"
            for err in exc.errors()[:5]
        )
        raise InvalidParamsError(f"Invalid {what}: {problems}") from None


def v03pb_send_request(message: pb03.SendMessageRequest) -> SendMessageRequest:
    def convert(pb: pb03.SendMessageRequest) -> SendMessageRequest:
        params = proto03.FromProto.message_send_params(pb)
        return conversions.to_core_send_message_request(v03.SendMessageRequest(id=0, params=params))

    return _v03_proto_convert("SendMessageRequest", convert, message)


def v03pb_get_request(task_id: str, history_length: int | None) -> GetTaskRequest:
    """In v0.3 historyLength 0 means "no limit", not "no history" (the SDK's conversion)."""
    params = v03.TaskQueryParams(id=task_id, history_length=history_length)
    return conversions.to_core_get_task_request(v03.GetTaskRequest(id=0, params=params))


def v03_event(response: Any, *, final: bool) -> Any:
    """One stream event (a v1.0 StreamResponse) as v0.3's model; v0.3 marks the status update
    that ends a stream `final` (input-required ends one too)."""
    event = conversions.to_compat_stream_response(response).result
    if isinstance(event, v03.TaskStatusUpdateEvent):
        event.final = final
    return event


def push_event(item: StreamItem) -> Any:
    """A push delivery's body: one event on its own, in v0.3's JSON."""
    return v03_dump(v03_event(item.response, final=item.final))


class V03StreamEvents:
    """One v0.3 stream's events, from its v1.0 StreamResponses in order. A v0.3 stream that
    follows a task ends with a status update marked `final` (v0.3 clients wait for it), so:

    - a stream that ends on a task snapshot (the task had already ended, or stopped for input,
      when the stream opened) gets a final status update with the task's status after it;
    - an agent that answers a task's stream with a Message (v1.0 sends the Task, then the
      Message) completes the task with that message: v0.3 has no Message after a Task, and
      clients of the v0.3 SDK refuse one, so it goes as the final status update (completed,
      carrying the message), as v0.1 renders it. A stream that is one Message stays one.

    One instance per stream; it returns the events (v0.3 models) for one response."""

    def __init__(self) -> None:
        self.task: tuple[str, str] | None = None  # (id, context id) once a task went out

    def __call__(self, response: Any, *, final: bool) -> list[Any]:
        payload = response.WhichOneof("payload")
        if payload == "message" and self.task is not None:
            task_id, context_id = self.task
            message = response.message
            done = TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=message)
            return [self._status(message.task_id or task_id, context_id, done)]
        if payload == "task":
            self.task = (response.task.id, response.task.context_id)
        events = [v03_event(response, final=final)]
        if final and payload == "task":
            task = response.task
            events.append(self._status(task.id, task.context_id, task.status))
        return events

    @staticmethod
    def _status(task_id: str, context_id: str, status: TaskStatus) -> Any:
        update = TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
        return v03_event(StreamResponse(status_update=update), final=True)


# The wire forms of v0.3: JSON-RPC (and push) speak the SDK's v0.3 models' JSON; gRPC the v0.3
# protos; REST the JSON form of those protos.
# The wire forms of v0.3: JSON-RPC (and push) speak the JSON of the SDK's v0.3 models; gRPC
# the v0.3 protos; REST the JSON form of those protos.
Form = Literal["json", "proto", "proto_json"]


def as_form(model: Any, form: Form, to_proto: Callable[[Any], Any]) -> Any:
    """A v0.3 model in one wire form; `to_proto` is the SDK's ToProto function for its type."""
    if form == "json":
        return v03_dump(model)
    proto = to_proto(model)
    return proto if form == "proto" else MessageToDict(proto)


def send_result(result: TaskProto | MessageProto, form: Form) -> Any:
    """SendMessage's answer: the task, or the agent's direct Message."""
    if isinstance(result, TaskProto):
        model: Any = conversions.to_compat_task(result)
    else:
        model = conversions.to_compat_message(result)
    return as_form(model, form, proto03.ToProto.task_or_message)


def task_out(task: TaskProto, form: Form) -> Any:
    return as_form(conversions.to_compat_task(task), form, proto03.ToProto.task)


def card_out(card: AgentCard, form: Form) -> Any:
    return as_form(conversions.to_compat_agent_card(card), form, proto03.ToProto.agent_card)


def push_config_out(config: TaskPushNotificationConfig, form: Form) -> Any:
    compat = conversions.to_compat_task_push_notification_config(config)
    return as_form(compat, form, proto03.ToProto.task_push_notification_config)


def list_result(
    request: ListTasksRequest, response: ListTasksResponse, form: Literal["json", "proto_json"]
) -> dict[str, Any]:
    """tasks/list's answer (v0.3's proto has no ListTasksResponse, so REST answers in the
    JSON-RPC result's shape), tasks in the binding's form; artifacts only when asked for."""
    tasks = [task_out(task, form) for task in response.tasks]
    if not request.include_artifacts:
        for task in tasks:
            task.pop("artifacts", None)
    return {
        "tasks": tasks,
        "totalSize": response.total_size,
        "pageSize": response.page_size,
        "nextPageToken": response.next_page_token,
    }


def stream_renderer(form: Form) -> Callable[[StreamItem], list[Any]]:
    """How one stream's items become v0.3 events in `form`: one renderer per stream (it
    remembers what went out, see V03StreamEvents)."""
    events = V03StreamEvents()

    def render(item: StreamItem) -> list[Any]:
        return [
            as_form(event, form, proto03.ToProto.stream_response)
            for event in events(item.response, final=item.final)
        ]

    return render


def v03pb_push_config_request(
    request: pb03.CreateTaskPushNotificationConfigRequest,
) -> TaskPushNotificationConfig:
    """v0.3's create request (`parent: tasks/{id}`, the config, an optional `config_id`)."""
    compat = _v03_proto_convert(
        "CreateTaskPushNotificationConfigRequest",
        proto03.FromProto.task_push_notification_config_request,
        request,
    )
    core = conversions.to_core_task_push_notification_config(compat)
    if not core.id and request.config_id:
        core.id = request.config_id
    return core


# --- v0.3 JSON bodies on REST (the "json" spelling, bindings.codecs.spellings) ---------------


def v03json_send_request(params: dict[str, Any]) -> SendMessageRequest:
    """A REST body in v0.3's JSON (MessageSendParams), read as JSON-RPC reads message/send's
    params: the SDK's v0.3 model, then its conversion."""
    request = v03_request(v03.SendMessageRequest, "message/send", params)
    return v03_convert("message/send", conversions.to_core_send_message_request, request)


def v03json_push_config_request(params: dict[str, Any]) -> TaskPushNotificationConfig:
    """A REST body in v0.3's JSON: a TaskPushNotificationConfig (`taskId`,
    `pushNotificationConfig`), as tasks/pushNotificationConfig/set's params."""
    method = "tasks/pushNotificationConfig/set"
    request = v03_request(v03.SetTaskPushNotificationConfigRequest, method, params)
    return v03_convert(
        method, conversions.to_core_create_task_push_notification_config_request, request
    )
