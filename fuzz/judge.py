"""What counts as a bad answer (issue 17, item 1), per binding.

A bad answer is: a 5xx; a connection reset, a close without an answer, or no answer within the
bound; an HTTP body that is not the binding's format (JSON-RPC: a JSON-RPC 2.0 response with
`error.code` and `error.message`, or a result; REST: a `google.rpc.Status`-style
`{"error": {"code", "status", "message"}}`, or a result; never HTML or plain text); JSON-RPC's
InternalError (-32603, its 500); a gRPC UNKNOWN, INTERNAL, UNAVAILABLE or DATA_LOSS, a hang, or
an error status without the `google.rpc.Status` details and ErrorInfo the platform sends with
every client mistake. grpcio's own answers are a status with a message: UNIMPLEMENTED for a
method nobody serves, RESOURCE_EXHAUSTED for a message over the size limit.

`judge_http` and `judge_grpc` return "" for a good answer, else why it is bad.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from google.rpc import error_details_pb2, status_pb2

from .wire import GrpcAnswer, GrpcCase, HttpAnswer, HttpCase

# Requests that the HTTP layer (Twisted's HTTPChannel, daphne's WebRequest) answers itself,
# before any binding sees them. Plain daphne resets them or gives a bare 400 or an HTML page;
# the platform's web process (a2a_platform.webserver, as `manage.py runweb` starts it) answers
# them with a status and a JSON body. A bad answer to such a request is reported as known,
# under the owner of that work, and whether known answers fail the run is the caller's choice
# (`--allow-known`): by default they do.
KNOWN: dict[str, str] = {
    "long-url": "drain: a request line over 16 KB is reset by plain daphne (webserver: 414)",
    "long-headers": "drain: headers over 16 KB get plain daphne's bare 400 (webserver: 431)",
    "multipart": "drain: a multipart body gets plain daphne's bare 400 (webserver: 415)",
    "header-name": "drain: a header name that is not a token gets plain daphne's bare or HTML 400",
    "header-value": "drain: NUL or another byte RFC 9110 bans in a header value gets plain "
    "daphne's bare or HTML 400",
    "odd-target": "drain: raw non-ASCII or control bytes in the path or query get plain "
    "daphne's bare or HTML 400",
    "framing": "drain: a malformed Content-Length or Transfer-Encoding gets plain daphne's "
    "bare 400",
    # Not the HTTP layer's, but the URL configuration's: bindings.rest.bad_request answers in
    # the bindings' forms once a2a_platform/urls.py names it as handler400.
    "host": "coordinator: a Host the platform does not serve gets Django's HTML 400 until "
    "a2a_platform/urls.py sets handler400 = 'bindings.rest.bad_request'",
}
# Twisted's limit on the request line and headers together (HTTPChannel.totalHeadersSize).
HEADERS_LIMIT = 16_384
_TOKEN = re.compile(rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+")
# NUL (Twisted), and what daphne refuses in a value (daphne.utils.INVALID_HEADER_VALUE_BYTES).
_BANNED_VALUE_BYTES = frozenset(b"\x00\x0b\x0c\x1c\x1d\x1e\x85")


def known_cause(case: HttpCase, answer: HttpAnswer, host: str) -> str:
    """Why a bad answer to this request is a known one (a KNOWN key), or ""."""
    if cause := http_layer(case, host):
        return cause
    sent_host = any(name.lower() == b"host" for name, _ in case.headers)
    if sent_host and answer.status == 400 and _media_type(answer) == "text/html":
        return "host"
    return ""


def http_layer(case: HttpCase, host: str) -> str:
    """Why the HTTP layer answers the request before any binding sees it (a KNOWN key), or
    ""."""
    head = case.head(host)
    if sum(len(line) for line in head) > HEADERS_LIMIT:
        return "long-url" if len(head[0]) > HEADERS_LIMIT else "long-headers"
    if any(byte > 0x7E or byte < 0x21 for byte in case.target):
        return "odd-target"
    for name, value in case.headers:
        if not _TOKEN.fullmatch(name):
            return "header-name"
        if _BANNED_VALUE_BYTES.intersection(value):
            return "header-value"
        lowered = name.lower()
        if lowered == b"content-type" and value.lower().startswith(b"multipart/"):
            return "multipart"
        if lowered == b"content-length" and not value.strip().isdigit():
            return "framing"
        if lowered == b"transfer-encoding" and value.strip().lower() not in (
            b"chunked",
            b"identity",
        ):
            return "framing"
    return ""


JSON_TYPES = ("application/json", "application/a2a+json")
INTERNAL_ERROR = -32603
BAD_GRPC_CODES = frozenset({"UNKNOWN", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "CANCELLED"})


def _strict_json(data: bytes) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def _media_type(answer: HttpAnswer) -> str:
    return answer.header("Content-Type").split(";")[0].strip().lower()


# --- HTTP -----------------------------------------------------------------------------------


def judge_http(case: HttpCase, answer: HttpAnswer, host: str = "127.0.0.1:8000") -> str:
    """Why the answer is bad, or "". `host`: the Host the request was sent with (it counts
    towards the size of its headers)."""
    if http_layer(case, host):
        # Refused by the HTTP layer before the path was read as a binding's: JSON-RPC's
        # envelope and REST's Status are as right as each other.
        case = dataclasses.replace(case, binding="any")
    if answer.failure:
        return answer.failure
    status = answer.status or 0
    if status >= 500:
        return f"HTTP {status}"
    if 300 <= status < 400:
        return f"HTTP {status}: a redirect, not an answer of the binding"
    if status < 200:
        return f"HTTP {status}"
    media = _media_type(answer)
    if case.method == "HEAD":
        if status >= 400 and media not in JSON_TYPES:
            return f"HTTP {status} to HEAD with Content-Type {media!r}"
        return ""
    if status == 204:
        if case.binding != "rest" and _all_notifications(case.body) and not answer.body:
            return ""
        return "HTTP 204 to a request that expects an answer"
    if media == "text/event-stream":
        if status != 200:
            return f"an event stream with HTTP {status}"
        return _judge_events(case, answer)
    if media not in JSON_TYPES:
        return f"HTTP {status} with Content-Type {media or 'none'!r}, not JSON"
    try:
        body = _strict_json(answer.body)
    except (ValueError, UnicodeDecodeError) as exc:
        return f"HTTP {status} whose body is not JSON ({exc})"
    if case.binding == "jsonrpc":
        return _judge_jsonrpc(body)
    if case.binding == "any" and not _judge_jsonrpc(body):
        return ""
    return _judge_rest(status, body)


def _all_notifications(body: bytes) -> bool:
    """Whether the request is a JSON-RPC notification, or a batch of only notifications: the
    one request JSON-RPC answers with nothing."""
    try:
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    items = value if isinstance(value, list) and value else [value]
    return all(isinstance(item, dict) and "id" not in item for item in items)


def _judge_jsonrpc(body: Any) -> str:
    if isinstance(body, list):
        if not body:
            return "an empty JSON array as the answer"
        return next((why for item in body if (why := _jsonrpc_response(item))), "")
    return _jsonrpc_response(body)


def _jsonrpc_response(item: Any) -> str:
    if not isinstance(item, dict):
        return f"a JSON-RPC answer that is not an object: {str(item)[:80]}"
    if item.get("jsonrpc") != "2.0":
        return "a JSON-RPC answer without 'jsonrpc': '2.0'"
    if "id" not in item or not (item["id"] is None or isinstance(item["id"], str | int)):
        return "a JSON-RPC answer without a valid 'id'"
    if ("result" in item) == ("error" in item):
        return "a JSON-RPC answer without exactly one of 'result' and 'error'"
    if "error" not in item:
        return ""
    error = item["error"]
    if not isinstance(error, dict):
        return "a JSON-RPC 'error' that is not an object"
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        return "a JSON-RPC error without an integer 'code' and a string 'message'"
    if code == INTERNAL_ERROR:
        return f"JSON-RPC InternalError (-32603): {message[:200]}"
    return ""


def _judge_rest(status: int, body: Any) -> str:
    if status < 400:
        return ""
    return _rest_error(body, status)


def _rest_error(body: Any, status: int | None) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "an error body without a google.rpc.Status 'error' object"
    code, message, name = error.get("code"), error.get("message"), error.get("status")
    if not isinstance(code, int) or not isinstance(message, str) or not isinstance(name, str):
        return "a REST error without an integer 'code' and string 'status' and 'message'"
    if status is not None and code != status:
        return f"a REST error whose code {code} is not the HTTP status {status}"
    if name in BAD_GRPC_CODES:
        return f"a REST error with status {name}: {message[:200]}"
    return ""


_EVENT_SPLIT = re.compile(rb"\r\n\r\n|\n\n|\r\r")


def _judge_events(case: HttpCase, answer: HttpAnswer) -> str:
    """Each event's data is one JSON value in the binding's form: a JSON-RPC response, or a
    REST result or Status error."""
    for block in _EVENT_SPLIT.split(answer.body):
        data = [
            line[5:].removeprefix(b" ") for line in block.splitlines() if line.startswith(b"data:")
        ]
        if not data:
            continue
        try:
            event = _strict_json(b"\n".join(data))
        except (ValueError, UnicodeDecodeError) as exc:
            return f"an SSE event whose data is not JSON ({exc})"
        speaks_jsonrpc = isinstance(event, dict) and "jsonrpc" in event
        if case.binding == "jsonrpc" or (case.binding == "any" and speaks_jsonrpc):
            why = _jsonrpc_response(event)
        elif isinstance(event, dict) and "error" in event:
            why = _rest_error(event, None)
        else:
            why = ""
        if why:
            return f"in the event stream: {why}"
    return ""


# --- gRPC -----------------------------------------------------------------------------------

STATUS_DETAILS = "grpc-status-details-bin"


def judge_grpc(
    case: GrpcCase, answer: GrpcAnswer, response_class: Callable[[str], type[ProtoMessage]]
) -> str:
    if answer.failure:
        return answer.failure
    if answer.code == "OK":
        if not case.response_type:
            return ""
        cls = response_class(case.response_type)
        for data in answer.responses:
            try:
                cls.FromString(data)
            except DecodeError as exc:
                return f"a response that is not a {case.response_type}: {exc}"
        return ""
    if answer.code in BAD_GRPC_CODES:
        return f"{answer.code}: {answer.details[:300]}"
    if answer.code == "DEADLINE_EXCEEDED":
        return "no answer within the bound (DEADLINE_EXCEEDED)"
    if not answer.details:
        return f"{answer.code} without a message"
    if answer.code == "UNIMPLEMENTED" and not case.served:
        return ""  # grpcio's own answer for a method nobody serves
    if answer.code == "RESOURCE_EXHAUSTED" and "larger than max" in answer.details:
        return ""  # grpcio's own answer for a message over the size limit
    return _status_details(answer)


def _status_details(answer: GrpcAnswer) -> str:
    raw = next((v for k, v in answer.trailing if k == STATUS_DETAILS), None)
    if not isinstance(raw, bytes):
        return f"{answer.code} without google.rpc.Status details: {answer.details[:200]}"
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except DecodeError:
        return f"{answer.code} whose {STATUS_DETAILS} is not a google.rpc.Status"
    if status.code != grpc.StatusCode[answer.code].value[0]:
        return f"{answer.code} whose google.rpc.Status has another code ({status.code})"
    infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
    if not infos:
        return f"{answer.code} whose google.rpc.Status carries no ErrorInfo"
    return ""
