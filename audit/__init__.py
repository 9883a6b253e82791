"""The audit log: every change made in the console, the admin and management commands, and the
credentials the agents refused, counted (docs/audit.md).

`auth_failure` is what the protocol edge calls when it refuses a credential: in memory only,
safe on the request path and from async code."""

from .failures import auth_failure

__all__ = ["auth_failure"]
