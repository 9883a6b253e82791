"""Refused credentials, counted: a row of the log per (tenant, agent, reason, UTC hour) with how
many, the first and the last, and the first few addresses, rather than a row per refusal.

A refusal is on the request path (the protocol edge calls `auth_failure` where it refuses a
credential), and a client retrying a bad key, or someone guessing keys, makes thousands; so
counting does no I/O. It goes to this process's buffer (a2a_platform.buffers, as the usage
meter's counts do), merged per key, at most MAX_KEYS keys: past that, a new key is dropped and
counted, and the next write logs how many were. A thread adds the buffer to the log every
`A2A_AUDIT_FLUSH_SECONDS`, and at exit (audit.services.auth_failures_add). What a process
killed outright had counted (at most one interval) is lost.

Failed console and admin logins are counted the same way, as the platform's (no tenant), with
the user name only when an account has it: a password typed into the name field is never
recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from a2a_platform.buffers import Buffer

# Distinct (tenant, agent, reason, hour) keys a process holds between writes.
MAX_KEYS = 1000
# Addresses kept per hour's row: the first ones seen.
SOURCES_KEPT = 5
REASON_MAX = 200
SOURCE_MAX = 100

# tenant (None: a console or admin login), agent (None: no agent named), reason, and the UTC
# hour it fell in.
FailureKey = tuple[int | None, int | None, str, datetime]


@dataclass
class Failures:
    """The refusals of one key: how many, the first and last, the first few addresses."""

    count: int
    first: datetime
    last: datetime
    sources: list[str] = field(default_factory=list)

    def merge(self, more: Failures) -> Failures:
        self.count += more.count
        self.first = min(self.first, more.first)
        self.last = max(self.last, more.last)
        sources_add(self.sources, more.sources)
        return self


def sources_add(sources: list[str], more: list[str]) -> None:
    """Add the addresses of `more` not in `sources`, up to SOURCES_KEPT in all."""
    for source in more:
        if len(sources) >= SOURCES_KEPT:
            return
        if source not in sources:
            sources.append(source)


class FailureBuffer(Buffer[FailureKey, Failures]):
    name = "audit-failures"
    label = "Audit"
    what = "refused-credential hours"

    def interval(self) -> float:
        return float(settings.A2A_AUDIT_FLUSH_SECONDS)

    def combine(self, entry: Failures, more: Failures) -> Failures:
        return entry.merge(more)

    def write(self, batch: dict[FailureKey, Failures]) -> None:
        from .services import auth_failures_add

        auth_failures_add(batch)

    def refused(
        self, tenant_id: int | None, agent_id: int | None, reason: str, source: str | None
    ) -> bool:
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        sources = [source[:SOURCE_MAX]] if source else []
        return self.add(
            (tenant_id, agent_id, reason[:REASON_MAX], hour), Failures(1, now, now, sources)
        )


FAILURES = FailureBuffer(process_wide=True, max_keys=MAX_KEYS)


def auth_failure(*, tenant_id: int, agent_id: int | None, reason: str, source: str | None) -> None:
    """Count a credential an agent of the tenant refused (`agent_id` None: refused before an
    agent was found), why (a short fixed text, e.g. "unknown API key": a reason carrying the
    credential would put it in the log) and from which address. No I/O: written to the log
    within `A2A_AUDIT_FLUSH_SECONDS`. Safe from async code."""
    FAILURES.refused(tenant_id, agent_id, reason, source)


def login_failed(sender: Any, credentials: dict[str, Any], request: Any = None, **_: Any) -> None:
    """Django's `user_login_failed`: a console or admin login refused."""
    from django.contrib.auth import get_user_model

    User: Any = get_user_model()
    username = str(credentials.get(User.USERNAME_FIELD) or credentials.get("username") or "")
    accounts = User._default_manager.filter(**{User.USERNAME_FIELD: username})
    if username and accounts.exists():
        reason = f"login refused for {username}"
    else:
        reason = "login refused for a user name no account has"
    source = str(request.META.get("REMOTE_ADDR") or "") if request is not None else ""
    FAILURES.refused(None, None, reason, source or None)
