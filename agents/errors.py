"""Errors about the request and who sends it, raised before any A2A method runs.

Each class says what every binding answers with (DRF's way: the exception carries its status
and code, and one handler per binding reads them, bindings.errors): the HTTP status, the
JSON-RPC code (-32000..-32099 is the range JSON-RPC leaves to servers), the gRPC status, and
the `google.rpc.ErrorInfo` reason.
"""

from __future__ import annotations


class RequestError(Exception):
    """A request the platform refuses before the A2A method: a malformed one by default."""

    http_status = 400
    jsonrpc_code = -32600
    grpc_status = "INVALID_ARGUMENT"
    reason = "INVALID_REQUEST"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def headers(self) -> dict[str, str]:
        """HTTP headers the answer carries."""
        return {}


class AuthenticationRequired(RequestError):
    """No usable credentials. Every binding answers HTTP 401 (gRPC UNAUTHENTICATED)."""

    http_status = 401
    jsonrpc_code = -32050
    grpc_status = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": 'Bearer realm="a2a", charset="UTF-8"'}


class AgentNotFound(RequestError):
    """No active agent at this URL."""

    http_status = 404
    jsonrpc_code = -32051
    grpc_status = "NOT_FOUND"
    reason = "AGENT_NOT_FOUND"

    def __init__(self, tenant_slug: str, agent_slug: str) -> None:
        super().__init__(
            f"No agent {agent_slug[:100]!r} is hosted for tenant {tenant_slug[:100]!r}."
        )
