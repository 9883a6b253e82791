"""The one exception tree of the A2A services, and its translation per binding.

The error classes are the ones `a2a-sdk` ships (`a2a.utils.errors`); the SDK also ships the
spec's tables from class to JSON-RPC code, HTTP status and gRPC status, which every binding
reads through the helpers below, so a code is decided in exactly one place.
"""

from __future__ import annotations

from typing import Any

from a2a.utils.error_handlers import build_error_details
from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)


def jsonrpc_code(error: A2AError) -> int:
    return JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)


def jsonrpc_error(error: A2AError) -> dict[str, Any]:
    """The JSON-RPC error object; A2A errors carry a google.rpc.ErrorInfo with their reason."""
    body: dict[str, Any] = {"code": jsonrpc_code(error), "message": error.message}
    if type(error) in A2A_ERROR_MAPPING:
        body["data"] = build_error_details(error)
    return body


def http_status(error: A2AError) -> int:
    mapping = A2A_ERROR_MAPPING.get(type(error))
    return mapping.http_code if mapping else 500


def grpc_status(error: A2AError) -> str:
    if isinstance(error, VersionNotSupportedError):
        # The spec's table (5.4) says FAILED_PRECONDITION; the platform's gRPC issue and the
        # A2A TCK ask for UNIMPLEMENTED (the service does not implement that version). The
        # ErrorInfo reason VERSION_NOT_SUPPORTED says which error it is either way.
        return "UNIMPLEMENTED"
    mapping = A2A_ERROR_MAPPING.get(type(error))
    return mapping.grpc_status if mapping else "INTERNAL"


def task_not_found(task_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(f"Task {task_id!r} was not found.")


__all__ = [
    "A2AError",
    "ContentTypeNotSupportedError",
    "ExtendedAgentCardNotConfiguredError",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "MethodNotFoundError",
    "PushNotificationNotSupportedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnsupportedOperationError",
    "VersionNotSupportedError",
    "grpc_status",
    "http_status",
    "jsonrpc_code",
    "jsonrpc_error",
    "task_not_found",
]
