"""The one exception tree of the A2A services.

The error classes are the ones `a2a-sdk` ships (`a2a.utils.errors`), with the spec's tables
from class to JSON-RPC code, HTTP status and gRPC status; bindings.errors reads them, once per
binding.
"""

from __future__ import annotations

from a2a.utils.errors import (
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
    "task_not_found",
]
