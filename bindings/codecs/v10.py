"""The v1.0 codec: proto-JSON params into the request protos, and answers out of them.

v1.0 is the canonical form, so this codec only parses (strictly, dropping unknown field names)
and shapes the few answers whose JSON differs from a plain MessageToDict.
"""

from __future__ import annotations

from typing import Any, TypeVar

from a2a.types import ListTasksRequest, ListTasksResponse, SendMessageResponse
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from google.protobuf.descriptor import Descriptor
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message as ProtoMessage

from tasks_app.errors import InvalidParamsError
from tasks_app.streams import StreamItem

P = TypeVar("P", bound=ProtoMessage)


def v10_params(params: dict[str, Any], message_type: type[P]) -> P:
    """Parse v1.0 params into the request proto.

    Unknown field names are dropped for forward compatibility, as the SDK does. Protobuf's own
    lenient mode would also turn an unknown enum name ("ROLE_BOSS") into the default value, so
    the unknown names are removed first and the parse itself stays strict.
    """
    try:
        return ParseDict(known_fields(params, message_type.DESCRIPTOR), message_type())
    except (ParseError, ValueError, RecursionError) as exc:
        raise InvalidParamsError(f"Invalid params for {message_type.__name__}: {exc}") from None


def known_fields(value: Any, descriptor: Descriptor) -> Any:
    """A copy of a proto-JSON object without the keys its message type does not define."""
    if not isinstance(value, dict) or descriptor.full_name.startswith("google.protobuf."):
        return value  # well-known types (Struct, Timestamp, ...) have their own JSON forms
    fields = {f.json_name: f for f in descriptor.fields} | {f.name: f for f in descriptor.fields}
    known: dict[str, Any] = {}
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            continue
        if field.message_type is None or field.message_type.GetOptions().map_entry:
            known[key] = item
        elif isinstance(item, list):  # a repeated message field
            known[key] = [known_fields(element, field.message_type) for element in item]
        else:
            known[key] = known_fields(item, field.message_type)
    return known


def v10_list_result(request: ListTasksRequest, response: ListTasksResponse) -> dict[str, Any]:
    """ListTasks' answer in proto-JSON, every field present; artifacts only when asked for."""
    result = MessageToDict(response, always_print_fields_with_no_presence=True)
    if not request.include_artifacts:
        for task in result["tasks"]:
            task.pop("artifacts", None)
    return result


def send_result(result: TaskProto | MessageProto) -> SendMessageResponse:
    """SendMessage's answer: the task, or the agent's direct Message."""
    if isinstance(result, TaskProto):
        return SendMessageResponse(task=result)
    return SendMessageResponse(message=result)


def to_json(message: ProtoMessage) -> dict[str, Any]:
    return MessageToDict(message)


def stream_json(item: StreamItem) -> dict[str, Any]:
    """One stream event as v1.0's JSON (JSON-RPC and REST); gRPC sends `item.response`."""
    return MessageToDict(item.response)
