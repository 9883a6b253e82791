"""gRPC cases: a valid request of a method of one of the A2A services (lf.a2a.v1.A2AService,
a2a.v1.A2AService, a2a.A2AService), then mutated: odd field values, bytes that are not the
message, another method's message, odd metadata; or a method nobody serves.

The services, their methods and messages come from the sidecar's own reflection service, so
the fuzzer needs no copy of the platform's protos and covers every method it announces.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.json_format import ParseDict, ParseError
from google.protobuf.message import EncodeError
from google.protobuf.message import Message as ProtoMessage
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from . import nasty
from .http_cases import odd_task_id
from .jsonrpc_cases import PUSH_URL
from .target import Target
from .wire import GrpcCase

V10_SERVICE = "lf.a2a.v1.A2AService"


@dataclass(frozen=True)
class Method:
    service: str
    descriptor: MethodDescriptor

    @property
    def dialect(self) -> str:
        return "1.0" if self.service == V10_SERVICE else "0.3"


class Catalog:
    """The A2A services the sidecar announces through reflection, and their messages."""

    def __init__(self, channel: grpc.Channel) -> None:
        database = ProtoReflectionDescriptorDatabase(channel)
        self.pool = DescriptorPool(database)
        names = sorted(s for s in database.get_services() if s.endswith("A2AService"))
        self.methods = [
            Method(name, method)
            for name in names
            for method in self.pool.FindServiceByName(name).methods
        ]
        if not self.methods:
            raise RuntimeError("the sidecar's reflection announces no A2A service")
        self._classes: dict[str, type[ProtoMessage]] = {}
        for method in self.methods:  # resolved now: the judge runs on many threads
            self.message_class(method.descriptor.input_type.full_name)
            self.message_class(method.descriptor.output_type.full_name)

    def message_class(self, full_name: str) -> type[ProtoMessage]:
        if full_name not in self._classes:
            descriptor = self.pool.FindMessageTypeByName(full_name)
            self._classes[full_name] = message_factory.GetMessageClass(descriptor)
        return self._classes[full_name]


# --- valid requests, by message type ------------------------------------------------------


def _message_v10(rng: random.Random, target: Target) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": nasty.uuid_like(rng),
        "role": "ROLE_USER",
        "parts": [{"text": "fuzz"}],
    }
    if rng.random() < 0.3 and target.context_ids:
        message["contextId"] = rng.choice(target.context_ids)
    return message


def _message_v03(rng: random.Random, target: Target) -> dict[str, Any]:
    return {
        "messageId": nasty.uuid_like(rng),
        "role": "ROLE_USER",
        "content": [{"text": "fuzz"}],
    }


def _templates(rng: random.Random, target: Target, task: str) -> dict[str, Any]:
    tenant = target.agent_path
    config = target.config_id
    push: dict[str, Any] = {"url": PUSH_URL, "id": config, "token": "t"}
    return {
        "lf.a2a.v1.SendMessageRequest": {
            "tenant": tenant,
            "message": _message_v10(rng, target),
            "configuration": {"returnImmediately": rng.random() < 0.3},
        },
        "lf.a2a.v1.GetTaskRequest": {"tenant": tenant, "id": task, "historyLength": 1},
        "lf.a2a.v1.ListTasksRequest": {
            "tenant": tenant,
            "pageSize": 3,
            "pageToken": nasty.page_token(rng, target.page_token),
        },
        "lf.a2a.v1.CancelTaskRequest": {"tenant": tenant, "id": task},
        "lf.a2a.v1.SubscribeToTaskRequest": {"tenant": tenant, "id": task},
        "lf.a2a.v1.GetExtendedAgentCardRequest": {"tenant": tenant},
        "lf.a2a.v1.TaskPushNotificationConfig": {"tenant": tenant, "taskId": task, **push},
        "lf.a2a.v1.GetTaskPushNotificationConfigRequest": {
            "tenant": tenant,
            "taskId": task,
            "id": config,
        },
        "lf.a2a.v1.ListTaskPushNotificationConfigsRequest": {"tenant": tenant, "taskId": task},
        "lf.a2a.v1.DeleteTaskPushNotificationConfigRequest": {
            "tenant": tenant,
            "taskId": task,
            "id": config,
        },
        "a2a.v1.SendMessageRequest": {"message": _message_v03(rng, target)},
        "a2a.v1.GetTaskRequest": {"name": f"tasks/{task}", "historyLength": 1},
        "a2a.v1.CancelTaskRequest": {"name": f"tasks/{task}"},
        "a2a.v1.TaskSubscriptionRequest": {"name": f"tasks/{task}"},
        "a2a.v1.GetAgentCardRequest": {},
        "a2a.v1.CreateTaskPushNotificationConfigRequest": {
            "parent": f"tasks/{task}",
            "configId": config,
            "config": {"pushNotificationConfig": push},
        },
        "a2a.v1.GetTaskPushNotificationConfigRequest": {
            "name": f"tasks/{task}/pushNotificationConfigs/{config}"
        },
        "a2a.v1.ListTaskPushNotificationConfigRequest": {"parent": f"tasks/{task}"},
        "a2a.v1.DeleteTaskPushNotificationConfigRequest": {
            "name": f"tasks/{task}/pushNotificationConfigs/{config}"
        },
        "a2a_platform.v1.ListTasksRequest": {
            "pageSize": 3,
            "pageToken": nasty.page_token(rng, target.page_token),
        },
        "a2a_platform.v1.SetTaskPushNotificationRequest": {
            "config": {
                "name": f"tasks/{task}/pushNotificationConfigs/{config}",
                "pushNotificationConfig": push,
            }
        },
    }


def _valid(rng: random.Random, catalog: Catalog, target: Target, type_name: str) -> ProtoMessage:
    task = odd_task_id(rng, target) if rng.random() < 0.2 else _real_task(rng, target)
    request = catalog.message_class(type_name)()
    template = _templates(rng, target, task).get(type_name, {})
    try:
        ParseDict(template, request)
    except (ParseError, ValueError):
        pass  # an odd task id in a field that cannot hold it: the rest is still filled in
    return request


def _real_task(rng: random.Random, target: Target) -> str:
    tasks = target.all_tasks()
    return rng.choice(tasks) if tasks else nasty.uuid_like(rng)


# --- metadata -----------------------------------------------------------------------------


def _metadata(rng: random.Random, target: Target, method: Method) -> list[tuple[str, str | bytes]]:
    metadata: list[tuple[str, str | bytes]] = []
    if rng.random() < 0.5:
        metadata.append(("x-api-key", target.key))
    else:
        metadata.append(("authorization", f"Bearer {target.key}"))
    if method.dialect == "0.3" and rng.random() < 0.85:
        metadata.append(("a2a-agent", target.agent_path))
    if rng.random() < 0.15:
        metadata.append(("a2a-version", method.dialect))
    return metadata


# Metadata values a client may send: printable ASCII only (grpcio refuses the rest before
# sending, which would be the fuzzer's failure, not the server's).
def _printable(text: str) -> str:
    return "".join(c for c in text if " " <= c <= "~")[:2_000]


def _odd_metadata(rng: random.Random, target: Target) -> tuple[str, str | bytes]:
    name = rng.choice(
        (
            "a2a-version",
            "a2a-agent",
            "x-api-key",
            "authorization",
            "a2a-extensions",
            "x-a2a-extensions",
            "x-forwarded-host",
            "odd-bin",
            "a2a-agent-bin",
            "grpc-timeout-x",
        )
    )
    if name.endswith("-bin"):
        return name, bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    values = {
        "a2a-version": ("2.0", "0.1", "x", "", "1.0.0", "1" * 3_000, "0.3", "1.0"),
        "a2a-agent": (
            target.agent_path,
            "nobody/nothing",
            "x",
            "/",
            "a/b/c",
            f"{target.tenant}/",
            " " + target.agent_path,
            "a" * 101 + "/b",
        ),
        "x-forwarded-host": (
            f"{target.agent}--{target.tenant}.localhost",
            "nobody--nowhere.localhost",
            "",
            "[::1",
            "a" * 300,
        ),
    }.get(name)
    if values is not None:
        return name, rng.choice(values)
    return name, _printable(nasty.odd_string(rng)) or "x"


# --- field and byte mutations -----------------------------------------------------------------

_INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def _odd_scalar(rng: random.Random, field: FieldDescriptor) -> Any:
    kind = field.cpp_type
    if kind == FieldDescriptor.CPPTYPE_STRING:
        if field.type == FieldDescriptor.TYPE_BYTES:
            return bytes(rng.randrange(256) for _ in range(rng.choice((0, 5, 5_000))))
        # Protobuf strings are UTF-8: a lone surrogate cannot be set (the byte mutations
        # send invalid UTF-8 instead).
        return nasty.odd_string(rng).encode("utf-8", "replace").decode("utf-8")
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        return rng.choice((low, high, 0, -1 if low < 0 else 1, rng.randint(low, high)))
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        return rng.random() < 0.5
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        return rng.choice((-1, 0, 1, 5, 99, 2**31 - 1))
    return rng.choice((float("inf"), float("-inf"), float("nan"), -0.0, 1e308, 5e-324))


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _odd_fields(rng: random.Random, message: ProtoMessage, depth: int = 0) -> str:
    """One field somewhere in `message` set to an odd value; which one."""
    descriptor: Descriptor = message.DESCRIPTOR
    fields = list(descriptor.fields)
    if not fields:
        return "no fields"
    field = rng.choice(fields)
    name = field.name
    repeated = field.is_repeated
    try:
        if _is_map(field):
            container = getattr(message, name)
            key_field = field.message_type.fields_by_name["key"]
            value_field = field.message_type.fields_by_name["value"]
            key = _odd_scalar(rng, key_field)
            if value_field.message_type is None:
                container[key] = _odd_scalar(rng, value_field)
            else:
                container[key]  # noqa: B018 -- reading a message map's key adds it
            return f"{name}: odd map entry"
        if field.message_type is not None:
            if field.message_type.full_name == "google.protobuf.Struct":
                item = getattr(message, name).add() if repeated else getattr(message, name)
                item.update({"k": nasty.odd_scalar_or_string(rng), "deep": nasty.deep(rng, 20)})
                return f"{name}: odd struct"
            if field.message_type.full_name == "google.protobuf.Timestamp":
                stamp = getattr(message, name).add() if repeated else getattr(message, name)
                stamp.seconds = rng.choice((-(2**62), 2**62, -62135596801, 253402300800))
                stamp.nanos = rng.choice((0, -1, 10**9))
                return f"{name}: timestamp out of range"
            child = getattr(message, name).add() if repeated else getattr(message, name)
            if depth < 4 and rng.random() < 0.7:
                return f"{name}.{_odd_fields(rng, child, depth + 1)}"
            child.SetInParent()
            return f"{name}: empty message"
        value = _odd_scalar(rng, field)
        if repeated:
            getattr(message, name).extend([value] * rng.choice((1, 3, 1_000)))
        else:
            setattr(message, name, value)
        return f"{name}: odd value"
    except (ValueError, TypeError, AttributeError) as exc:
        return f"{name}: not settable ({type(exc).__name__})"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes) -> bytes:
    key = _varint(number << 3 | wire_type)
    if wire_type == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _deep_struct(depth: int) -> bytes:
    """google.protobuf.Struct nested `depth` times ({"a": {"a": ...}}): past the decoder's
    recursion limit."""
    struct = b""
    for _ in range(depth):
        value = _field(5, 2, struct)  # Value.struct_value
        entry = _field(1, 2, b"a") + _field(2, 2, value)  # map entry: key, value
        struct = _field(1, 2, entry)  # Struct.fields
    return struct


def _byte_mutation(rng: random.Random, data: bytes, descriptor: Descriptor) -> tuple[bytes, str]:
    strings = [f for f in descriptor.fields if f.type == FieldDescriptor.TYPE_STRING]
    messages = [f for f in descriptor.fields if f.type == FieldDescriptor.TYPE_MESSAGE]
    roll = rng.random()
    if roll < 0.15 and data:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncated at byte {cut} of {len(data)}"
    if roll < 0.3 and data:
        flipped = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] = rng.randrange(256)
        return bytes(flipped), "bytes flipped"
    if roll < 0.42:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))), "random bytes"
    if roll < 0.6 and strings:
        field = rng.choice(strings)
        bad = rng.choice(
            (b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"a\x80b", b"\xf4\x90\x80\x80")
        )
        return data + _field(field.number, 2, bad), f"{field.name}: not UTF-8"
    if roll < 0.7:
        unknown = _field(rng.choice((99, 1000, 536870911)), rng.choice((0, 2)), b"\x01")
        return data + unknown, "unknown field"
    if roll < 0.8 and messages:
        field = rng.choice(messages)
        return data + _field(field.number, 0, _varint(7)), f"{field.name}: wrong wire type"
    if roll < 0.88:
        number = rng.choice(descriptor.fields).number if descriptor.fields else 1
        return data + _varint(number << 3 | 2) + _varint(2**31) + b"ab", "length past the end"
    if roll < 0.95 and messages:
        field = rng.choice(messages)
        depth = rng.choice((50, 101, 200, 3_000))
        return data + _field(field.number, 2, _deep_struct(depth)), f"{field.name}: nested {depth}"
    return data + data, "message repeated"


# --- a case ---------------------------------------------------------------------------------


def grpc_case(rng: random.Random, target: Target, catalog: Catalog) -> GrpcCase:
    # A service first, then one of its methods: each service gets its share, however many
    # method names it has.
    service_name = rng.choice(sorted({m.service for m in catalog.methods}))
    method = rng.choice([m for m in catalog.methods if m.service == service_name])
    descriptor = method.descriptor
    input_type = descriptor.input_type.full_name
    request = _valid(rng, catalog, target, input_type)
    metadata = _metadata(rng, target, method)
    served = True
    name = descriptor.name
    service = method.service
    roll = rng.random()
    what = f"{service}/{name}"
    if roll < 0.15:
        payload = _serialize(request)
        what += ": valid"
    elif roll < 0.45:
        changes = [_odd_fields(rng, request) for _ in range(rng.choice((1, 1, 2, 3)))]
        payload = _serialize(request)
        what += ": " + "; ".join(changes)
    elif roll < 0.7:
        payload, change = _byte_mutation(rng, _serialize(request), descriptor.input_type)
        what += f": {change}"
    elif roll < 0.78:
        other = rng.choice(catalog.methods).descriptor.input_type.full_name
        payload = _serialize(_valid(rng, catalog, target, other))
        what += f": a {other} instead"
    elif roll < 0.93:
        payload = _serialize(request)
        extra = [_odd_metadata(rng, target) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.3:
            metadata = []
        metadata += extra
        what += ": metadata " + ", ".join(k for k, _ in extra)
    else:
        payload = _serialize(request)
        served = False
        if rng.random() < 0.5:
            name = rng.choice(("Nope", "sendMessage", "SendMessage2", ""))
        else:
            service = rng.choice(("a2a.v2.A2AService", "lf.a2a.v1.a2aservice", "A2AService"))
        what = f"{service}/{name}: not served"
    return GrpcCase(
        dialect=method.dialect,
        what=what,
        service=service,
        method=name,
        payload=payload,
        metadata=tuple(metadata),
        streaming=descriptor.server_streaming,
        served=served,
        response_type=descriptor.output_type.full_name if served else "",
    )


def _serialize(message: ProtoMessage) -> bytes:
    try:
        return message.SerializeToString()
    except EncodeError:
        return message.SerializePartialToString()
