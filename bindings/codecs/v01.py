"""The v0.1 codec: the early JSON-RPC dialect's plain dicts <-> the v1.0 protos.

v0.1 has no SDK types, so its shapes are mapped here by hand: parts carry `type` instead of
`kind`, the context is a `sessionId`, and the client chooses the task id. Parts on the way out
go through the SDK's v0.3 conversion, whose JSON differs from v0.1's only in that key.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable
from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.types import (
    AgentCard,
    AgentSkill,
    GetTaskRequest,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
)
from a2a.types import Artifact as ArtifactProto
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from a2a.utils.constants import TransportProtocol
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage

from a2a_platform.versions import V0_1
from tasks_app.errors import InvalidParamsError
from tasks_app.models import MAX_ID_LENGTH, TERMINAL_STATES
from tasks_app.streams import StreamItem

from .v03 import v03_dump

# v0.1 has one push config per task; it is stored under this id.
V01_PUSH_CONFIG_ID = "v0.1"

# v0.1's document names six states ("Task Lifecycle": created -> working -> input-required ->
# completed | failed | canceled), and only those go out. A task the platform has accepted but
# no agent has taken yet (v1.0's submitted) is v0.1's `created`. The v1.0 states v0.1 lacks read
# as the nearest of its six, the status message saying the rest: rejected is an unsuccessful
# end (failed), auth-required a pause for the client (input-required). Unspecified describes no
# stored task (every task starts submitted); should it ever be rendered, it reads as `created`,
# the state of a task about which nothing has been reported yet.
_STATE_NAMES: dict[int, str] = {
    TaskState.TASK_STATE_UNSPECIFIED: "created",
    TaskState.TASK_STATE_SUBMITTED: "created",
    TaskState.TASK_STATE_WORKING: "working",
    TaskState.TASK_STATE_INPUT_REQUIRED: "input-required",
    TaskState.TASK_STATE_COMPLETED: "completed",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "failed",
    TaskState.TASK_STATE_AUTH_REQUIRED: "input-required",
}
_ROLES = {"user": Role.ROLE_USER, "agent": Role.ROLE_AGENT}
_PART_TYPES = ("text", "data", "file")


# --- v0.1 -> v1.0 --------------------------------------------------------------------------


def _bad(path: str, problem: str) -> InvalidParamsError:
    return InvalidParamsError(f"'{path}' {problem}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "an array" if isinstance(value, list) else "an object"
    )


def _optional(data: dict[str, Any], name: str, kind: type, path: str) -> Any:
    """data[name] if present and not null, checked to be a `kind`; None otherwise."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        expected = {str: "a string", int: "an integer", dict: "an object", list: "an array"}
        raise _bad(path, f"must be {expected[kind]}, not {_kind(value)}.")
    return value


def _required(data: dict[str, Any], name: str, kind: type, path: str) -> Any:
    value = _optional(data, name, kind, path)
    if value is None:
        raise _bad(path, "is required.")
    return value


def _proto_json(value: Any, target: ProtoMessage, path: str) -> None:
    try:
        ParseDict(value, target)
    except (ParseError, ValueError, TypeError, RecursionError) as exc:
        raise _bad(path, f"is not representable: {exc}") from None


def _history_length(params: dict[str, Any]) -> int | None:
    value = _optional(params, "historyLength", int, "historyLength")
    if value is not None and value < 0:
        raise _bad("historyLength", f"must be zero or positive, not {value}.")
    return value


def v01_part(data: Any, path: str = "part") -> Part:
    """One v0.1 part ({type: text|data|file, ...}) as a v1.0 Part."""
    if not isinstance(data, dict):
        raise _bad(path, f"must be an object, not {_kind(data)}.")
    kind = data.get("type")
    if kind not in _PART_TYPES:
        raise _bad(f"{path}.type", f"must be one of {', '.join(_PART_TYPES)}, not {kind!r}.")
    part = Part()
    metadata = _optional(data, "metadata", dict, f"{path}.metadata")
    if kind == "text":
        part.text = _required(data, "text", str, f"{path}.text")
    elif kind == "data":
        value = _required(data, "data", dict, f"{path}.data")
        if metadata and metadata.get("data_part_compat") is True and set(value) == {"value"}:
            # What v0.1 (like v0.3) cannot hold, a data part that is not an object, went out
            # wrapped so; it comes back unwrapped.
            metadata = {k: v for k, v in metadata.items() if k != "data_part_compat"}
            _proto_json(value["value"], part.data, f"{path}.data.value")
        else:
            _proto_json(value, part.data.struct_value, f"{path}.data")
    else:
        file = _required(data, "file", dict, f"{path}.file")
        raw = _optional(file, "bytes", str, f"{path}.file.bytes")
        uri = _optional(file, "uri", str, f"{path}.file.uri")
        if (raw is None) == (uri is None):
            raise _bad(f"{path}.file", "must have exactly one of 'bytes' and 'uri'.")
        if raw is not None:
            try:
                part.raw = base64.b64decode(raw, validate=True)
            except (binascii.Error, ValueError):
                raise _bad(f"{path}.file.bytes", "is not valid base64.") from None
        else:
            part.url = uri
        if name := _optional(file, "name", str, f"{path}.file.name"):
            part.filename = name
        if mime_type := _optional(file, "mimeType", str, f"{path}.file.mimeType"):
            part.media_type = mime_type
    if metadata:
        _proto_json(metadata, part.metadata, f"{path}.metadata")
    return part


def v01_message(data: Any, path: str = "message") -> MessageProto:
    """A v0.1 message ({role, parts, metadata}) as a v1.0 Message with a fresh messageId:
    v0.1 messages have no id of their own."""
    if not isinstance(data, dict):
        raise _bad(path, f"must be an object, not {_kind(data)}.")
    role = data.get("role")
    if not isinstance(role, str) or role not in _ROLES:  # an object or array is unhashable
        raise _bad(f"{path}.role", f"must be 'user' or 'agent', not {role!r}.")
    parts = _required(data, "parts", list, f"{path}.parts")
    if not parts:
        raise _bad(f"{path}.parts", "must hold at least one part.")
    message = MessageProto(message_id=str(uuid.uuid4()), role=_ROLES[role])
    message.parts.extend(v01_part(p, f"{path}.parts[{i}]") for i, p in enumerate(parts))
    metadata = _optional(data, "metadata", dict, f"{path}.metadata")
    if metadata:
        _proto_json(metadata, message.metadata, f"{path}.metadata")
    return message


def v01_task_id(params: dict[str, Any]) -> str:
    """The task `id` of tasks/get, tasks/cancel or tasks/resubscribe params."""
    task_id = _required(params, "id", str, "id")
    if not task_id:
        raise _bad("id", "must not be empty.")
    _optional(params, "metadata", dict, "metadata")
    return task_id


def v01_sent_id(params: dict[str, Any]) -> str:
    """The task id as the client wrote it in its params ("" if it sent none). v0.1 clients
    choose their ids, commonly `uuid4().hex`: the platform stores the UUID, and answers with
    the client's own string, so a client that compares ids finds its task."""
    value = params.get("id")
    return value if isinstance(value, str) else ""


# Task.spelling of a v0.1 task whose client wrote its id as 32 hex digits (`uuid4().hex`): its
# push notifications carry the id so too.
HEX_ID = "hex"


def v01_id_spelling(params: dict[str, Any]) -> str:
    """How the client wrote the id of the task it sends to: HEX_ID, or "" (the dashed form)."""
    sent = v01_sent_id(params)
    return HEX_ID if len(sent) == 32 and "-" not in sent else ""


def v01_id_as_spelt(task_id: uuid.UUID | str, spelling: str) -> str:
    """The task id as its v0.1 client wrote it, from the task's recorded spelling."""
    value = task_id if isinstance(task_id, uuid.UUID) else uuid.UUID(str(task_id))
    return value.hex if spelling == HEX_ID else str(value)


def _new_task_id(params: dict[str, Any]) -> uuid.UUID | None:
    raw = _optional(params, "id", str, "id")
    if raw is None:
        return None
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise _bad(
            "id",
            f"must be a UUID: this server's task ids are UUIDs, and {raw[:80]!r} is not one "
            "(send e.g. uuid4().hex).",
        ) from None


def v01_send_request(params: dict[str, Any]) -> tuple[SendMessageRequest, uuid.UUID | None]:
    """tasks/send and tasks/sendSubscribe params as a v1.0 request, plus the task id the client
    chose (None if it chose none). Whether that id continues a task or names a new one is
    decided with the caller's tasks: see `v01_continue_or_create`."""
    task_id = _new_task_id(params)
    message = v01_message(params.get("message"))
    session_id = _optional(params, "sessionId", str, "sessionId")
    if session_id:
        if len(session_id) > MAX_ID_LENGTH:
            raise _bad("sessionId", f"is longer than {MAX_ID_LENGTH} characters.")
        message.context_id = session_id
    request = SendMessageRequest(message=message)
    modes = _optional(params, "acceptedOutputModes", list, "acceptedOutputModes")
    if modes is not None:
        for index, mode in enumerate(modes):
            if not isinstance(mode, str):
                raise _bad(f"acceptedOutputModes[{index}]", f"must be a string, not {_kind(mode)}.")
        request.configuration.accepted_output_modes.extend(modes)
    history_length = _history_length(params)
    if history_length is not None:
        request.configuration.history_length = history_length
    metadata = _optional(params, "metadata", dict, "metadata")
    if metadata:
        _proto_json(metadata, request.metadata, "metadata")
    push = v01_push_config(params, "pushNotification")
    if push is not None:
        request.configuration.task_push_notification_config.url = push[0]
    return request, task_id


def v01_push_config(params: dict[str, Any], where: str | None) -> tuple[str, dict] | None:
    """v0.1's push config, `{url, headers}`: at the top of tasks/pushNotification/set's params
    (`where` None), or under `pushNotification` in a send. None when a send has none."""
    if where is None:  # set: flat, or the original v0.1 form under pushNotificationConfig
        where = "pushNotificationConfig" if "pushNotificationConfig" in params else None
    config = params if where is None else params.get(where)
    if config is None:
        return None
    prefix = "" if where is None else f"{where}."
    if not isinstance(config, dict):
        raise _bad(where or "params", f"must be an object, not {_kind(config)}.")
    url = _required(config, "url", str, f"{prefix}url")
    headers = _optional(config, "headers", dict, f"{prefix}headers") or {}
    return url, headers


# --- v1.0 -> v0.1 --------------------------------------------------------------------------


def _dict(message: ProtoMessage) -> dict[str, Any]:
    return MessageToDict(message)


def v01_state(state: int) -> str:
    """A v1.0 task state by its v0.1 name (always one of the six v0.1's document gives)."""
    return _STATE_NAMES.get(state, "created")


def v01_part_json(part: Part) -> dict[str, Any]:
    compat = v03_dump(conversions.to_compat_part(part))
    return {"type": compat.pop("kind"), **compat}


def v01_message_json(message: MessageProto) -> dict[str, Any]:
    result: dict[str, Any] = {
        "role": "agent" if message.role == Role.ROLE_AGENT else "user",
        "parts": [v01_part_json(p) for p in message.parts],
    }
    if message.HasField("metadata"):
        result["metadata"] = _dict(message.metadata)
    return result


def v01_status_json(status: TaskStatus) -> dict[str, Any]:
    result: dict[str, Any] = {"state": v01_state(status.state)}
    if status.HasField("message"):
        result["message"] = v01_message_json(status.message)
    if status.HasField("timestamp"):
        result["timestamp"] = status.timestamp.ToJsonString()
    return result


def v01_artifact_json(
    artifact: ArtifactProto, *, index: int, append: bool, last_chunk: bool | None
) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if artifact.name:
        result["name"] = artifact.name
    if artifact.description:
        result["description"] = artifact.description
    result["parts"] = [v01_part_json(p) for p in artifact.parts]
    result["index"] = index
    result["append"] = append
    if last_chunk is not None:
        result["lastChunk"] = last_chunk
    if artifact.HasField("metadata"):
        result["metadata"] = _dict(artifact.metadata)
    return result


def v01_task_json(
    task: TaskProto, *, reply: MessageProto | None = None, task_id: str = ""
) -> dict[str, Any]:
    """A v1.0 Task as a v0.1 Task. `reply` is the agent's direct Message answer, if it gave
    one: v0.1 has no such answer, so it becomes the status message of the completed task.
    `task_id`: the task's id as the client spelled it (`v01_sent_id`), which the answer
    echoes; the stored id is a UUID, the client's string may be its 32-hex form."""
    status = TaskStatus()
    status.CopyFrom(task.status)
    history = list(task.history)
    if reply is not None:
        status.message.CopyFrom(reply)
        history = [m for m in history if m.message_id != reply.message_id]
    # A stored artifact is whole as it stands (append false); it can still grow until the
    # task ends, so only then is it the last chunk.
    ended = TaskState.Name(task.status.state) in TERMINAL_STATES
    result: dict[str, Any] = {
        "id": task_id or task.id,
        "sessionId": task.context_id,
        "status": v01_status_json(status),
        "artifacts": [
            v01_artifact_json(a, index=i, append=False, last_chunk=True if ended else None)
            for i, a in enumerate(task.artifacts)
        ],
        "history": [v01_message_json(m) for m in history],
    }
    if task.HasField("metadata"):
        result["metadata"] = _dict(task.metadata)
    return result


def v01_stream_event(
    response: StreamResponse,
    *,
    final: bool,
    task_id: str = "",
    artifact_indexes: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One v1.0 StreamResponse as a v0.1 streaming result: a TaskStatusUpdateEvent
    {id, status, final, metadata} or a TaskArtifactUpdateEvent {id, artifact, metadata}.

    `task_id` is used when the event does not name its task (a Message may not).
    `artifact_indexes`, one dict kept per stream, numbers artifacts as tasks/get does (in
    order of first appearance, seeded by a task snapshot); without it every index is 0.
    """
    kind = response.WhichOneof("payload")
    if kind == "task":
        task = response.task
        if artifact_indexes is not None:
            for artifact in task.artifacts:
                artifact_indexes.setdefault(artifact.artifact_id, len(artifact_indexes))
        event: dict[str, Any] = {
            "id": task.id or task_id,
            "status": v01_status_json(task.status),
            "final": final,
        }
        if task.HasField("metadata"):
            event["metadata"] = _dict(task.metadata)
        return event
    if kind == "status_update":
        update = response.status_update
        event = {"id": update.task_id or task_id, "status": v01_status_json(update.status)}
        event["final"] = final
        if update.HasField("metadata"):
            event["metadata"] = _dict(update.metadata)
        return event
    if kind == "artifact_update":
        chunk = response.artifact_update
        index = 0
        if artifact_indexes is not None:
            index = artifact_indexes.setdefault(chunk.artifact.artifact_id, len(artifact_indexes))
        event = {
            "id": chunk.task_id or task_id,
            "artifact": v01_artifact_json(
                chunk.artifact, index=index, append=chunk.append, last_chunk=chunk.last_chunk
            ),
        }
        if chunk.HasField("metadata"):
            event["metadata"] = _dict(chunk.metadata)
        return event
    if kind == "message":
        # A direct answer ends the exchange: in v0.1 terms, the task completed with it.
        message = response.message
        return {
            "id": message.task_id or task_id,
            "status": {"state": "completed", "message": v01_message_json(message)},
            "final": True,
        }
    raise ValueError("A StreamResponse without a payload cannot be sent to a v0.1 client.")


def v01_stream_events(
    response: StreamResponse,
    *,
    final: bool,
    task_id: str = "",
    artifact_indexes: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """One v1.0 StreamResponse as the v0.1 streaming results that carry all of it.

    A task snapshot (what a stream opens with) holds artifacts, which a v0.1 status update
    cannot: they go first, one TaskArtifactUpdateEvent each (whole, `append` false, numbered
    as tasks/get numbers them), then the status. Anything else is one result, as
    `v01_stream_event` gives it.
    """
    if response.WhichOneof("payload") != "task":
        return [
            v01_stream_event(
                response, final=final, task_id=task_id, artifact_indexes=artifact_indexes
            )
        ]
    task = response.task
    indexes = {} if artifact_indexes is None else artifact_indexes
    ended = TaskState.Name(task.status.state) in TERMINAL_STATES
    events = []
    for artifact in task.artifacts:
        index = indexes.setdefault(artifact.artifact_id, len(indexes))
        events.append(
            {
                "id": task.id or task_id,
                "artifact": v01_artifact_json(
                    artifact, index=index, append=False, last_chunk=True if ended else None
                ),
            }
        )
    events.append(
        v01_stream_event(response, final=final, task_id=task_id, artifact_indexes=indexes)
    )
    return events


def v01_card_json(card: AgentCard) -> dict[str, Any]:
    """A v1.0 AgentCard in the v0.1 shape.

    `url` carries `?A2A-Version=0.1`: v0.1 clients send no version header, and tasks/get and
    tasks/cancel are also v0.3 method names, so the URL is what keeps them in this dialect.
    """
    jsonrpc = [
        i.url
        for i in card.supported_interfaces
        if i.protocol_binding == TransportProtocol.JSONRPC.value
    ]
    result: dict[str, Any] = {
        "name": card.name,
        "description": card.description,
        "url": f"{jsonrpc[0] if jsonrpc else ''}?A2A-Version={V0_1}",
    }
    if card.HasField("provider"):
        result["provider"] = {"organization": card.provider.organization}
        if card.provider.url:
            result["provider"]["url"] = card.provider.url
    result["version"] = card.version
    if card.documentation_url:
        result["documentationUrl"] = card.documentation_url
    result["capabilities"] = {
        "streaming": card.capabilities.streaming,
        "pushNotifications": card.capabilities.push_notifications,
        # TaskEvent keeps every transition, but v0.1 has no method that returns them.
        "stateTransitionHistory": False,
    }
    result["authentication"] = {"schemes": _auth_schemes(card)}
    result["defaultInputModes"] = list(card.default_input_modes)
    result["defaultOutputModes"] = list(card.default_output_modes)
    result["skills"] = [_skill_json(s) for s in card.skills]
    return result


def _auth_schemes(card: AgentCard) -> list[str]:
    schemes: list[str] = []
    anonymous = False
    for requirement in card.security_requirements:
        if not requirement.schemes:
            anonymous = True  # an empty requirement: no credentials needed
        for name in requirement.schemes:
            scheme = card.security_schemes[name]
            which = scheme.WhichOneof("scheme")
            if which == "http_auth_security_scheme":
                label = scheme.http_auth_security_scheme.scheme.lower()
            elif which == "api_key_security_scheme":
                label = "apiKey"
            elif which in ("open_id_connect_security_scheme", "oauth2_security_scheme"):
                # v0.1 names only how a credential is sent: these tokens go as bearer tokens.
                label = "bearer"
            else:
                label = name
            if label not in schemes:
                schemes.append(label)
    if anonymous:
        schemes.append("none")
    return schemes


def _skill_json(skill: AgentSkill) -> dict[str, Any]:
    result: dict[str, Any] = {
        "id": skill.id,
        "name": skill.name,
        "description": skill.description,
        "tags": list(skill.tags),
    }
    if skill.examples:
        result["examples"] = list(skill.examples)
    if skill.input_modes:
        result["inputModes"] = list(skill.input_modes)
    if skill.output_modes:
        result["outputModes"] = list(skill.output_modes)
    return result


def stream_renderer(
    known_artifacts: list[str] | None = None, task_id: str = ""
) -> Callable[[StreamItem], Any]:
    """How one stream's items become v0.1 results. v0.1 numbers artifacts, once per stream, in
    the task's artifact order: `known_artifacts` seeds the numbering where no snapshot will
    (a replay after Last-Event-ID, a push delivery). `task_id`: the task's id as the client
    spelled it, which every result of the stream (all of one task) carries."""
    indexes = {artifact_id: n for n, artifact_id in enumerate(known_artifacts or [])}

    def render(item: StreamItem) -> list[dict[str, Any]]:
        # A v0.1 status update cannot carry a snapshot's artifacts: they go as events of
        # their own, each a frame with the same `id:`.
        events = v01_stream_events(
            item.response, final=item.final, task_id=str(item.task_id), artifact_indexes=indexes
        )
        if task_id:
            for event in events:
                event["id"] = task_id
        return events

    return render


def v01_get_request(params: dict[str, Any]) -> GetTaskRequest:
    """tasks/get's params."""
    request = GetTaskRequest(id=v01_task_id(params))
    history_length = _history_length(params)
    if history_length is not None:
        request.history_length = history_length
    return request


def v01_push_set_request(
    params: dict[str, Any],
) -> tuple[TaskPushNotificationConfig, dict[str, str]]:
    """tasks/pushNotification/set's params: the task's one config (v0.1 has one per task,
    stored under V01_PUSH_CONFIG_ID, so setting again replaces it) and its headers."""
    task_id = _required(params, "id", str, "id")
    _optional(params, "sessionId", str, "sessionId")
    url, headers = v01_push_config(params, None) or ("", {})
    config = TaskPushNotificationConfig(task_id=task_id, id=V01_PUSH_CONFIG_ID, url=url)
    return config, headers


def v01_push_config_json(config: TaskPushNotificationConfig) -> dict[str, Any]:
    """v0.1's view of a push config (the answer to tasks/pushNotification/get and set): its
    `url`, and `headers` always empty. Their values are the client's secrets, write-only as
    v1.0's token and credentials are; their names go too, since a name could only come back
    with a made-up value, which a client that sets back what it read would have delivered."""
    return {"url": config.url, "headers": {}}


def v01_push_get_task_id(params: dict[str, Any]) -> str:
    """tasks/pushNotification/get's params: the task's id."""
    task_id = _required(params, "id", str, "id")
    _optional(params, "sessionId", str, "sessionId")
    return task_id


def v01_push_headers(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """The headers of a send's inline push config, which the caller carries to the send."""
    push = v01_push_config(params, "pushNotification")
    return tuple(push[1].items()) if push else ()
