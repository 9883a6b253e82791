"""Errors about the request and who sends it, raised before any A2A method runs.

Each class says what every binding answers with (DRF's way: the exception carries its status
and code, and one handler per binding reads them, bindings.errors): the HTTP status, the
JSON-RPC code (-32000..-32099 is the range JSON-RPC leaves to servers), the gRPC status, and
the `google.rpc.ErrorInfo` reason.
"""

from __future__ import annotations

import math
from typing import Any


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


def _challenge(**params: str) -> str:
    """A `Bearer` challenge (RFC 6750 §3) with these parameters; values are cut to the
    characters a quoted RFC 6750 parameter may hold (printable ASCII without `"` and `\\`)."""
    parts = ['realm="a2a"']
    for name, value in params.items():
        if value:
            kept = "".join(c if " " <= c <= "~" and c not in '"\\' else "'" for c in value)
            parts.append(f'{name}="{kept[:300]}"')
    return "Bearer " + ", ".join(parts)


class AuthenticationRequired(RequestError):
    """No usable credentials. Every binding answers HTTP 401 (gRPC UNAUTHENTICATED), with a
    `WWW-Authenticate: Bearer` challenge that points at the agent's OAuth 2.0 Protected
    Resource Metadata (RFC 9728 §5.1) when the agent is known."""

    http_status = 401
    jsonrpc_code = -32050
    grpc_status = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"
    # RFC 6750's error code for the challenge ("" for none: no credentials were sent).
    error = ""

    def __init__(self, message: str, *, why: str = "", resource_metadata: str = "") -> None:
        super().__init__(message)
        # Why, in a few fixed words that never quote the credential: what the audit log
        # counts (audit.failures).
        self.why = why or self.reason.lower()
        self.resource_metadata = resource_metadata
        # The agent that refused the credentials, once known (`at`).
        self.tenant_id: int | None = None
        self.agent_id: int | None = None

    def at(self, agent: Any) -> AuthenticationRequired:
        """This refusal, as made by `agent` (an agents.models.Agent)."""
        self.tenant_id, self.agent_id = agent.tenant_id, agent.pk
        return self

    def headers(self) -> dict[str, str]:
        return {
            "WWW-Authenticate": _challenge(
                error=self.error,
                error_description=self.message if self.error else "",
                resource_metadata=self.resource_metadata,
            )
        }


class InvalidToken(AuthenticationRequired):
    """A bearer token that is not valid here (agents.identity): expired, for another
    audience or issuer, badly signed, or signed with a key or algorithm not accepted."""

    reason = "INVALID_TOKEN"
    error = "invalid_token"


class InsufficientScope(RequestError):
    """A valid token whose scopes do not cover the operation: HTTP 403, gRPC
    PERMISSION_DENIED, with the scopes needed in the challenge."""

    http_status = 403
    jsonrpc_code = -32057
    grpc_status = "PERMISSION_DENIED"
    reason = "INSUFFICIENT_SCOPE"

    def __init__(self, message: str, *, scopes: tuple[str, ...], resource_metadata: str = ""):
        super().__init__(message)
        self.scopes = scopes
        self.resource_metadata = resource_metadata

    def headers(self) -> dict[str, str]:
        return {
            "WWW-Authenticate": _challenge(
                error="insufficient_scope",
                error_description=self.message,
                scope=" ".join(self.scopes),
                resource_metadata=self.resource_metadata,
            )
        }


class IssuerUnavailable(RequestError):
    """A token's issuer could not be asked for its keys (and none are kept): the token may
    be good, so HTTP 503 with Retry-After (gRPC UNAVAILABLE), not a 401 that would send the
    client to fetch a new one."""

    http_status = 503
    jsonrpc_code = -32058
    grpc_status = "UNAVAILABLE"
    reason = "ISSUER_UNAVAILABLE"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "5"}


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


class NoDefaultAgent(AgentNotFound):
    """A call to the platform's own origin, which serves the default agent, when none is set."""

    def __init__(self) -> None:
        RequestError.__init__(
            self,
            "This platform has no default agent (A2A_DEFAULT_AGENT), so its origin serves no "
            "agent; each agent is served at /a2a/<tenant>/<agent>/, its card at "
            ".well-known/agent-card.json there.",
        )


class LimitExceeded(RequestError):
    """A call over one of its tenant's limits (agents.plans), refused before anything was
    written: HTTP 429 with Retry-After and the RateLimit headers, gRPC RESOURCE_EXHAUSTED,
    and a JSON-RPC code of the platform's own per kind of limit. The details carry a
    `google.rpc.ErrorInfo` naming the limit and a `google.rpc.RetryInfo` with the delay.

    `limit`: the limit's name (agents.plans.LIMITS); `value`: its value; `scope`: whose it is
    (`tenant`, `agent` or `key`); `retry_after`: seconds until a retry can succeed;
    `window`: for rates, the seconds the rate is counted over (the RateLimit headers)."""

    http_status = 429
    grpc_status = "RESOURCE_EXHAUSTED"
    # One reason and code per kind of limit (docs/limits.md).
    RATE = ("RATE_LIMITED", -32054)
    QUOTA = ("QUOTA_EXCEEDED", -32055)
    CONCURRENCY = ("CONCURRENCY_LIMITED", -32056)

    def __init__(
        self,
        message: str,
        *,
        kind: tuple[str, int],
        limit: str,
        value: int,
        scope: str,
        retry_after: float,
        window: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reason, self.jsonrpc_code = kind
        self.limit = limit
        self.value = value
        self.scope = scope
        self.retry_after = max(retry_after, 0.0)
        self.window = window

    @property
    def retry_after_seconds(self) -> int:
        """Retry-After in whole seconds, rounded up (HTTP has no fractions), at least 1."""
        return max(1, math.ceil(self.retry_after))

    def headers(self) -> dict[str, str]:
        headers = {"Retry-After": str(self.retry_after_seconds)}
        if self.window is not None:
            # draft-ietf-httpapi-ratelimit-headers: the policy, and what is left of it.
            policy = f'"{self.limit}";q={self.value};w={math.ceil(self.window)}'
            headers["RateLimit-Policy"] = policy
            headers["RateLimit"] = f'"{self.limit}";r=0;t={self.retry_after_seconds}'
        return headers

    def metadata(self) -> dict[str, str]:
        """The ErrorInfo's metadata: which limit, its value and whose it is."""
        return {"limit": self.limit, "value": str(self.value), "scope": self.scope}
