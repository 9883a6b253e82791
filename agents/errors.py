"""Errors about who is calling: raised before any A2A method runs."""

from __future__ import annotations


class AuthenticationRequired(Exception):
    """No usable credentials. Every binding answers HTTP 401 (gRPC UNAUTHENTICATED)."""

    http_status = 401
    # A server-defined JSON-RPC code (the -32000..-32099 range is reserved for servers).
    jsonrpc_code = -32050
    grpc_status = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AgentNotFound(Exception):
    """No active agent at this URL."""

    http_status = 404

    def __init__(self, tenant_slug: str, agent_slug: str) -> None:
        self.message = f"No agent {agent_slug[:100]!r} is hosted for tenant {tenant_slug[:100]!r}."
        super().__init__(self.message)
