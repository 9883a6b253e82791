"""The wire spellings of REST v0.3 bodies, told apart, and the draft's shapes.

The documents that define REST v0.3 disagree on how its JSON is spelled:

- "proto-json": the JSON form of the v0.3 protos (a Message's `content`, roles `ROLE_USER`,
  parts `{"text": ...}`), what the SDK's v0.3 REST client sends; the default.
- "json": v0.3's JSON objects (the v0.3 specification, the v0.3 endpoint summary): `parts`,
  roles `user`/`agent`, parts with `kind`, a bare Task or Message as SendMessage's answer.
- "draft": the earlier v1 draft proto and its JSON Schema: `parts` with roles `ROLE_USER`,
  parts without `kind`, files with `mediaType`, a push config created from the bare config.
- "mapping": the transport mapping table. Its REST column is the AIP-127 transcoding of the
  v0.3 protos, so its bodies are proto-json's; only its two list answers differ (bare arrays).
  No body can say "mapping": a request asks for it (`?spelling=mapping`).

A body is read by its clues (field names and values only one spelling uses); a body whose
clues contradict each other is refused naming both fields. Converting stays with the SDK: a
draft body is renamed into proto-json and read as proto-json, and a draft answer is the
proto-json answer renamed back.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tasks_app.errors import InvalidParamsError

PROTO_JSON = "proto-json"
JSON = "json"
DRAFT = "draft"
MAPPING = "mapping"
# Also the order of preference when a body fits several.
SPELLINGS = (PROTO_JSON, JSON, DRAFT, MAPPING)
DEFAULT = PROTO_JSON

NAMES = {
    PROTO_JSON: "v0.3 proto-JSON",
    JSON: "v0.3 JSON",
    DRAFT: "the v1 draft's JSON",
    MAPPING: "the transport mapping table's JSON",
}

_PROTO = frozenset({PROTO_JSON, MAPPING})
_ALL = frozenset(SPELLINGS)

Clue = tuple[str, frozenset[str], str]  # (the field, the spellings it fits, what it is)


def asked(value: str | None) -> str:
    """The spelling a request names (`?spelling=`), checked; "" when it names none."""
    if value is None or value == "":
        return ""
    if value not in SPELLINGS:
        raise InvalidParamsError(
            f"Query parameter 'spelling' must be one of {', '.join(SPELLINGS)}, got {value[:40]!r}."
        )
    return value


def resolve(clues: Iterator[Clue], asked_for: str) -> frozenset[str]:
    """The spellings a body fits, given its clues; a contradiction is a 400 naming the two
    fields, and a body that does not fit the spelling asked for names the field that says so."""
    fits = _ALL
    seen: list[Clue] = []
    for clue in clues:
        where, spellings, what = clue
        if not fits & spellings:
            other = next((c for c in seen if not c[1] & spellings), seen[-1])
            raise InvalidParamsError(
                f"The body mixes REST v0.3 spellings: {where!r} {what}, but {other[0]!r} "
                f"{other[2]}. Send one spelling throughout (see /api/docs/)."
            )
        if asked_for and asked_for not in spellings:
            raise InvalidParamsError(
                f"'spelling' asks for {asked_for} ({NAMES[asked_for]}), but {where!r} {what}."
            )
        fits &= spellings
        seen.append(clue)
    return frozenset({asked_for}) if asked_for else fits


def preferred(fits: frozenset[str]) -> str:
    return next(spelling for spelling in SPELLINGS if spelling in fits)


# --- clues ------------------------------------------------------------------------------------

_ROLE_JSON = {"user", "agent"}


def _message_clues(message: Any, where: str) -> Iterator[Clue]:
    if not isinstance(message, dict):
        return
    if "content" in message:
        yield f"{where}.content", _PROTO, "is the proto-JSON name of a message's parts"
    if "parts" in message:
        yield f"{where}.parts", frozenset({JSON, DRAFT}), "is not proto-JSON's (`content`)"
    if "kind" in message:
        yield f"{where}.kind", frozenset({JSON}), "is only in v0.3 JSON"
    for name in ("referenceTaskIds", "reference_task_ids"):
        if name in message:
            yield f"{where}.{name}", frozenset({JSON, DRAFT}), "is not in the v0.3 protos"
    role = message.get("role")
    if isinstance(role, str) and role in _ROLE_JSON:
        yield f"{where}.role", frozenset({JSON}), f"is {role!r} (v0.3 JSON)"
    elif (isinstance(role, str) and role.startswith("ROLE_")) or isinstance(role, int):
        yield f"{where}.role", _PROTO | {DRAFT}, f"is {role!r} (a proto enum name)"
    for container in ("content", "parts"):
        parts = message.get(container)
        if isinstance(parts, list):
            for index, part in enumerate(parts):
                yield from _part_clues(part, f"{where}.{container}[{index}]")


def _part_clues(part: Any, where: str) -> Iterator[Clue]:
    if not isinstance(part, dict):
        return
    if "kind" in part:
        yield f"{where}.kind", frozenset({JSON}), "is only in v0.3 JSON"
    file = part.get("file")
    if not isinstance(file, dict):
        return
    for name in ("fileWithUri", "fileWithBytes", "file_with_uri", "file_with_bytes"):
        if name in file:
            yield f"{where}.file.{name}", _PROTO | {DRAFT}, "is a proto field (JSON: uri/bytes)"
    for name in ("uri", "bytes"):
        if name in file:
            yield f"{where}.file.{name}", frozenset({JSON}), "is v0.3 JSON's"
    for name in ("mimeType", "mime_type"):
        if name in file:
            yield f"{where}.file.{name}", _PROTO | {JSON}, "is v0.3's (the draft: mediaType)"
    for name in ("mediaType", "media_type"):
        if name in file:
            yield f"{where}.file.{name}", frozenset({DRAFT}), "is the draft's (v0.3: mimeType)"


def send_clues(body: dict[str, Any]) -> Iterator[Clue]:
    """The clues of a SendMessage body (MessageSendParams, or a SendMessageRequest)."""
    if "request" in body:
        yield "request", _PROTO | {DRAFT}, "is the proto field name of the message"
    for name in ("message", "request"):
        yield from _message_clues(body.get(name), name)
    configuration = body.get("configuration")
    if isinstance(configuration, dict):
        for name in ("pushNotification", "push_notification"):
            if name in configuration:
                yield (
                    f"configuration.{name}",
                    _PROTO,
                    "is proto-JSON's (JSON and the draft: pushNotificationConfig)",
                )
        for name in ("pushNotificationConfig", "push_notification_config"):
            if name in configuration:
                yield (
                    f"configuration.{name}",
                    frozenset({JSON, DRAFT}),
                    "is not proto-JSON's (`pushNotification`)",
                )


def push_create_clues(body: dict[str, Any]) -> Iterator[Clue]:
    """The clues of a push config create body: proto-json's CreateTaskPushNotificationConfig-
    Request (`parent`, `configId`, `config`; the mapping table sends `config` alone), v0.3
    JSON's TaskPushNotificationConfig (`taskId`, `pushNotificationConfig`), or the draft's bare
    TaskPushNotificationConfig (`name`, `pushNotificationConfig`)."""
    if "url" in body:
        raise InvalidParamsError(
            "'url' at the top of the body is v1.0's bare config; a v0.3 body wraps it: "
            '{"config": {"pushNotificationConfig": {"url": ...}}} (proto-JSON), '
            '{"taskId": ..., "pushNotificationConfig": {"url": ...}} (JSON) or '
            '{"pushNotificationConfig": {"url": ...}} (the draft).'
        )
    for name in ("config", "parent", "configId", "config_id"):
        if name in body:
            yield name, _PROTO, "is proto-JSON's CreateTaskPushNotificationConfigRequest"
    for name in ("taskId", "task_id"):
        if name in body:
            yield name, frozenset({JSON}), "is v0.3 JSON's TaskPushNotificationConfig"
    if "name" in body:
        yield "name", frozenset({DRAFT}), "is the draft's bare TaskPushNotificationConfig"
    for name in ("pushNotificationConfig", "push_notification_config"):
        if name in body:
            yield name, frozenset({JSON, DRAFT}), "is the config itself, unwrapped"


# --- the draft's shapes <-> proto-json ---------------------------------------------------------


def _renamed(value: dict[str, Any], renames: dict[str, str], where: str) -> dict[str, Any]:
    out = dict(value)
    for old, new in renames.items():
        if old in out:
            if new in out:
                raise InvalidParamsError(f"{where!r} has both {old!r} and {new!r}.")
            out[new] = out.pop(old)
    return out


def _draft_part_in(part: Any, where: str) -> Any:
    if isinstance(part, dict) and isinstance(part.get("file"), dict):
        file = _renamed(
            part["file"], {"mediaType": "mimeType", "media_type": "mime_type"}, f"{where}.file"
        )
        return {**part, "file": file}
    return part


def draft_send_body(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A draft SendMessageRequest as the v0.3 proto-JSON one (the draft proto renamed
    `content` to `parts`, `mime_type` to `media_type`, `push_notification` to
    `push_notification_config`), and the message's referenceTaskIds, which the v0.3 protos
    lack."""
    out = dict(body)
    references: list[str] = []
    for name in ("message", "request"):
        message = out.get(name)
        if not isinstance(message, dict):
            continue
        message = _renamed(message, {"parts": "content"}, name)
        for key in ("referenceTaskIds", "reference_task_ids"):
            value = message.pop(key, [])
            if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise InvalidParamsError(f"'{name}.{key}' must be a list of task ids.")
            references += value
        if isinstance(message.get("content"), list):
            message["content"] = [
                _draft_part_in(part, f"{name}.parts[{i}]")
                for i, part in enumerate(message["content"])
            ]
        out[name] = message
    configuration = out.get("configuration")
    if isinstance(configuration, dict):
        out["configuration"] = _renamed(
            configuration,
            {
                "pushNotificationConfig": "pushNotification",
                "push_notification_config": "push_notification",
            },
            "configuration",
        )
    return out, references


_CONFIG_NAME = re.compile(r"tasks/([^/]+)/pushNotificationConfigs/([^/]+)")


def draft_push_create_body(task_id: str, body: dict[str, Any], config_id: str) -> dict[str, Any]:
    """The draft's create body (the config itself, `body: "config"` in its HTTP rule; a
    `configId` query parameter, the transcoding of its SetTaskPushNotificationConfigRequest's
    config_id) as proto-JSON's CreateTaskPushNotificationConfigRequest."""
    config = dict(body)
    name = config.pop("name", "")
    if not isinstance(name, str):
        raise InvalidParamsError(
            "'name' must be a string: tasks/{id}/pushNotificationConfigs/{id}."
        )
    if name:
        match = _CONFIG_NAME.fullmatch(name)
        if match is None:
            raise InvalidParamsError(
                f"'name' {name[:100]!r} is not tasks/{{task id}}/pushNotificationConfigs/{{id}}."
            )
        if match.group(1) != task_id:
            raise InvalidParamsError(
                f"'name' names task {match.group(1)[:100]!r} but the path names {task_id!r}."
            )
        if config_id and config_id != match.group(2):
            raise InvalidParamsError(
                f"'name' names config {match.group(2)[:100]!r} but configId is {config_id!r}."
            )
        config_id = match.group(2)
    inner = config.get("pushNotificationConfig", config.get("push_notification_config"))
    if config_id and isinstance(inner, dict) and inner.get("id", config_id) != config_id:
        raise InvalidParamsError(
            f"'pushNotificationConfig.id' {str(inner['id'])[:100]!r} is not the config the "
            f"name or configId names ({config_id!r})."
        )
    return {"parent": f"tasks/{task_id}", "configId": config_id, "config": config}


def _draft_part_out(part: dict[str, Any]) -> dict[str, Any]:
    if isinstance(part.get("file"), dict):
        return {**part, "file": _renamed(part["file"], {"mimeType": "mediaType"}, "file")}
    return part


def draft_message(message: dict[str, Any]) -> dict[str, Any]:
    out = _renamed(message, {"content": "parts"}, "message")
    if "parts" in out:
        out["parts"] = [_draft_part_out(part) for part in out["parts"]]
    return out


def _draft_status(status: dict[str, Any]) -> dict[str, Any]:
    if "message" in status:
        return {**status, "message": draft_message(status["message"])}
    return status


def _draft_artifact(artifact: dict[str, Any]) -> dict[str, Any]:
    if "parts" in artifact:
        return {**artifact, "parts": [_draft_part_out(part) for part in artifact["parts"]]}
    return artifact


def draft_task(task: dict[str, Any]) -> dict[str, Any]:
    """A v0.3 proto-JSON Task in the draft's spelling."""
    out = dict(task)
    if "status" in out:
        out["status"] = _draft_status(out["status"])
    if "history" in out:
        out["history"] = [draft_message(message) for message in out["history"]]
    if "artifacts" in out:
        out["artifacts"] = [_draft_artifact(artifact) for artifact in out["artifacts"]]
    return out


def draft_event(event: dict[str, Any]) -> dict[str, Any]:
    """A v0.3 proto-JSON SendMessageResponse or StreamResponse in the draft's spelling."""
    out = dict(event)
    if "task" in out:
        out["task"] = draft_task(out["task"])
    if "message" in out:
        out["message"] = draft_message(out["message"])
    if "statusUpdate" in out:
        update = out["statusUpdate"]
        if "status" in update:
            out["statusUpdate"] = {**update, "status": _draft_status(update["status"])}
    if "artifactUpdate" in out:
        update = out["artifactUpdate"]
        if "artifact" in update:
            out["artifactUpdate"] = {**update, "artifact": _draft_artifact(update["artifact"])}
    return out


def draft_card(card: dict[str, Any]) -> dict[str, Any]:
    """A v0.3 proto-JSON AgentCard in the draft's spelling: its interfaces name their binding
    `protocolBinding` (v0.3: `transport`), and `supportedInterfaces` lists them all, the
    preferred one first."""
    out = dict(card)

    def interface(value: dict[str, Any]) -> dict[str, Any]:
        return _renamed(value, {"transport": "protocolBinding"}, "interface")

    additional = [interface(value) for value in out.get("additionalInterfaces", [])]
    if additional:
        out["additionalInterfaces"] = additional
    supported: list[dict[str, Any]] = []
    if out.get("url"):
        supported.append(
            {"url": out["url"], "protocolBinding": out.get("preferredTransport") or "JSONRPC"}
        )
    for value in additional:
        if value not in supported:
            supported.append(value)
    if supported:
        out["supportedInterfaces"] = supported
    return out
