"""Every error a caller can meet, as each binding answers it: one translator per binding.

What to answer is read from the exception, never decided by a ladder of cases. A2A's own errors
(`tasks_app.errors`, the SDK's classes) take their HTTP status, JSON-RPC code, gRPC status and
reason from the SDK's copy of the spec's tables; a subclass may carry an `http_status` of its
own (415 for a request body's media type, 413 for its size). The platform's request errors
(`agents.errors.RequestError`) carry all four as class attributes; a limit's refusal
(`LimitExceeded`) also names the limit in its ErrorInfo's metadata and the wait in a
`google.rpc.RetryInfo`, on every binding. Anything else is a bug: logged, and answered as
A2A's InternalError without a word of its text.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import grpc
from a2a.utils.error_handlers import build_error_details
from a2a.utils.errors import A2A_ERROR_MAPPING, JSON_RPC_ERROR_CODE_MAP
from django.core.exceptions import SuspiciousOperation
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from a2a_platform.db import database_lost
from a2a_platform.versions import V0_1, V0_3
from agents.errors import LimitExceeded, RequestError
from tasks_app.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidRequestError,
    VersionNotSupportedError,
)

logger = logging.getLogger(__name__)

DOMAIN = "a2a-protocol.org"
RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo"


class UnsupportedMediaType(ContentTypeNotSupportedError):
    """The request body's own media type: HTTP 415, where a send's acceptedOutputModes that
    nothing matches (the same A2A error) is a 400."""

    http_status = 415


class BodyTooLarge(InvalidRequestError):
    http_status = 413


class MethodNotAllowed(RequestError):
    http_status = 405
    grpc_status = "UNIMPLEMENTED"
    reason = "METHOD_NOT_ALLOWED"

    def __init__(self, message: str, allow: list[str]) -> None:
        super().__init__(message)
        self.allow = allow

    def headers(self) -> dict[str, str]:
        return {"Allow": ", ".join(self.allow)}


class DatabaseUnavailable(RequestError):
    """The platform's database is away for a moment (a restart, a failover): HTTP 503 with
    Retry-After, gRPC UNAVAILABLE (which clients retry), JSON-RPC -32053. Nothing was done
    that the answer does not say: a send either made its task or did not, and repeating it
    with the same messageId is safe."""

    http_status = 503
    jsonrpc_code = -32053
    grpc_status = "UNAVAILABLE"
    reason = "DATABASE_UNAVAILABLE"

    def __init__(self) -> None:
        super().__init__(
            "The platform's database is unavailable for a moment (a restart or a failover); "
            "try again."
        )

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "1"}


def error_info(reason: str, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `google.rpc.ErrorInfo` in its JSON form (an `@type` detail)."""
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": reason,
        "domain": DOMAIN,
        "metadata": metadata or {},
    }


def retry_info(seconds: float) -> dict[str, Any]:
    """A `google.rpc.RetryInfo` in its JSON form: `retryDelay` is a Duration ("0.400s")."""
    return {"@type": RETRY_INFO_TYPE, "retryDelay": f"{seconds:.3f}s"}


@dataclass(frozen=True)
class Problem:
    """One error as the bindings see it."""

    message: str
    http_status: int
    jsonrpc_code: int
    grpc_status: str
    reason: str
    # The error's class name as v0.3 clients read it (REST `type`, gRPC message prefix).
    name: str
    details: list[dict[str, Any]]
    # The error is about the HTTP request itself (401, 404 agent, 405, 413, 415): JSON-RPC
    # answers it with that status too, where A2A's method errors go out as HTTP 200.
    http_level: bool
    is_a2a: bool
    headers: dict[str, str] = field(default_factory=dict)
    # The platform's own ErrorInfo metadata (a limit's name, value and scope), and the seconds
    # a client should wait before a retry (RetryInfo), where the error has them.
    metadata: dict[str, str] = field(default_factory=dict)
    retry_after: float | None = None


# An error's message is at most this many bytes of UTF-8. Messages quote what the client sent
# (a task id, a resource name), which can be megabytes; gRPC carries the message twice in the
# trailers (grpc-message, percent-encoded, and the google.rpc.Status), and clients refuse
# trailers over 8 to 16 KB, so an unbounded message became RESOURCE_EXHAUSTED on the client.
MESSAGE_BYTES = 1_000


def bounded(message: str) -> str:
    """The message cut to MESSAGE_BYTES (on a character boundary, marked with an ellipsis),
    with anything UTF-8 cannot hold (a lone surrogate quoted from the request) replaced."""
    data = message.encode("utf-8", "replace")
    if len(data) <= MESSAGE_BYTES:
        return data.decode("utf-8")
    return data[: MESSAGE_BYTES - 3].decode("utf-8", "ignore") + "\u2026"


def problem_of(exc: BaseException) -> Problem:
    if isinstance(exc, A2AError):
        # The spec's class: the exception's own, or the A2A class it refines.
        spec_class = next(
            c for c in type(exc).__mro__ if c in JSON_RPC_ERROR_CODE_MAP or c is A2AError
        )
        mapping = A2A_ERROR_MAPPING.get(spec_class)
        own_status = getattr(exc, "http_status", None)
        details = build_error_details(exc)
        if mapping:
            details[0]["reason"] = mapping.reason  # the SDK looks the reason up by exact class
        return Problem(
            message=bounded(exc.message),
            http_status=own_status or (mapping.http_code if mapping else 500),
            jsonrpc_code=JSON_RPC_ERROR_CODE_MAP.get(spec_class, -32603),
            grpc_status=mapping.grpc_status if mapping else "INTERNAL",
            reason=mapping.reason if mapping else "INTERNAL_ERROR",
            name=spec_class.__name__,
            details=details if mapping else [],
            http_level=own_status is not None,
            is_a2a=True,
        )
    if isinstance(exc, SuspiciousOperation):
        # Django's refusals of a malformed request, wherever the request is read (more query
        # parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS, ...): the client's mistake.
        return problem_of(RequestError(str(exc) or "The request is malformed."))
    if isinstance(exc, RequestError):
        metadata, retry_after = {}, None
        if isinstance(exc, LimitExceeded):
            metadata, retry_after = exc.metadata(), exc.retry_after
        details = [error_info(exc.reason, metadata)]
        if retry_after is not None:
            details.append(retry_info(retry_after))
        return Problem(
            message=bounded(exc.message),
            http_status=exc.http_status,
            jsonrpc_code=exc.jsonrpc_code,
            grpc_status=exc.grpc_status,
            reason=exc.reason,
            name=exc.reason.title().replace("_", ""),
            details=details,
            http_level=True,
            is_a2a=False,
            headers=exc.headers(),
            metadata=metadata,
            retry_after=retry_after,
        )
    if database_lost(exc):
        logger.warning("Answered as DatabaseUnavailable: %s", exc)
        return problem_of(DatabaseUnavailable())
    logger.error("Unhandled error answered as InternalError", exc_info=exc)
    return problem_of(
        InternalError("The server failed to process this request; it has been logged.")
    )


# --- JSON-RPC -------------------------------------------------------------------------------

# v0.1 defines only -32001 (task not found) and -32003 (push) of its own, and uses -32002 for
# "session not found": A2A errors it lacks are reported as a server error (-32000).
_V01_CODES = frozenset({-32700, -32600, -32601, -32602, -32603, -32001, -32003})


def jsonrpc_error(problem: Problem, dialect: str = "") -> dict[str, Any]:
    """The JSON-RPC error object; every error carries a google.rpc.ErrorInfo with its reason."""
    code = problem.jsonrpc_code
    if dialect == V0_1 and code not in _V01_CODES:
        code = -32000
    body: dict[str, Any] = {"code": code, "message": problem.message}
    if problem.details:
        body["data"] = problem.details
    return body


def jsonrpc_response(request_id: Any, exc: BaseException, dialect: str = "") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": jsonrpc_error(problem_of(exc), dialect)}


# --- REST -------------------------------------------------------------------------------------


def rest_body(problem: Problem, dialect: str) -> dict[str, Any]:
    """A `google.rpc.Status` body (spec 11.6); v0.3 bodies also carry the `type` and
    `message` the v0.3 REST clients read."""
    body: dict[str, Any] = {
        "error": {
            "code": problem.http_status,
            "status": problem.grpc_status,
            "message": problem.message,
        }
    }
    if problem.details:
        body["error"]["details"] = problem.details
    if dialect == V0_3:
        body.update(type=problem.name, message=problem.message)
    return body


# --- gRPC -------------------------------------------------------------------------------------


def grpc_status_of(exc: BaseException, dialect: str) -> grpc.Status:
    """The call's status with a `google.rpc.Status` carrying the ErrorInfo (and, for a limit's
    refusal, a RetryInfo after it); v0.3 clients read the A2A error's class from the message
    (`TaskNotFoundError: ...`)."""
    problem = problem_of(exc)
    message = problem.message
    if dialect == V0_3 and problem.is_a2a:
        message = f"{problem.name}: {message}"
    code_name = problem.grpc_status
    if problem.name == VersionNotSupportedError.__name__:
        # The spec's table (5.4) says FAILED_PRECONDITION; the A2A TCK asks gRPC for
        # UNIMPLEMENTED (the service does not implement that version). The ErrorInfo reason
        # VERSION_NOT_SUPPORTED says which error it is either way.
        code_name = "UNIMPLEMENTED"
    info = any_pb2.Any()
    info.Pack(
        error_details_pb2.ErrorInfo(reason=problem.reason, domain=DOMAIN, metadata=problem.metadata)
    )
    details = [info]
    if problem.retry_after is not None:
        delay = duration_pb2.Duration()
        delay.FromMilliseconds(math.ceil(problem.retry_after * 1000))
        retry = any_pb2.Any()
        retry.Pack(error_details_pb2.RetryInfo(retry_delay=delay))
        details.append(retry)
    code = grpc.StatusCode[code_name].value[0]
    return rpc_status.to_status(status_pb2.Status(code=code, message=message, details=details))
