"""Reads of the audit log: the filters, keyset pages (newest first), and the record of an event
as the exports write it. What a person may see at all is the console's scope
(console.selectors.audit_scope): every read here narrows a queryset it is given."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypedDict

from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from .models import AUTH_FAILURE, AuditEvent

# The actions and kinds of object the log records, as the filters offer them.
ACTIONS = (
    "create",
    "update",
    "delete",
    "enable",
    "disable",
    "revoke",
    "rotate",
    "retire",
    "cancel",
    "reply",
    "send",
    "redeliver",
    AUTH_FAILURE,
)
TENANT_OBJECT_TYPES = (
    "tenant",
    "agent",
    "api_key",
    "signing_key",
    "membership",
    "issuer",
    "task",
    "delivery",
    "push_config",
)
# Kinds only the platform's own events have (no tenant): operators see them.
PLATFORM_OBJECT_TYPES = ("plan", "user", "group", "job", "job_failure", "login")


class InvalidPageToken(ValueError):
    """A page link the console did not make."""


@dataclass(frozen=True)
class EventFilters:
    actor: str = ""  # contained in the actor
    action: str = ""
    object_type: str = ""
    text: str = ""  # contained in the object, its id, the actor, the reason or the changes
    since: date | None = None  # UTC days, both included
    until: date | None = None


def events_filtered(*, events: QuerySet[AuditEvent], filters: EventFilters) -> QuerySet[AuditEvent]:
    if filters.actor:
        events = events.filter(actor__icontains=filters.actor)
    if filters.action:
        events = events.filter(action=filters.action)
    if filters.object_type:
        events = events.filter(object_type=filters.object_type)
    if filters.since:
        events = events.filter(at__gte=datetime.combine(filters.since, time.min, UTC))
    if filters.until:
        end = datetime.combine(filters.until + timedelta(days=1), time.min, UTC)
        events = events.filter(at__lt=end)
    if filters.text:
        text = filters.text
        events = events.annotate(changes_text=Cast("changes", TextField())).filter(
            Q(object_label__icontains=text)
            | Q(object_id=text)
            | Q(actor__icontains=text)
            | Q(reason__icontains=text)
            | Q(changes_text__icontains=text)
        )
    return events


# --- keyset pages: (at, id), newest first -------------------------------------------------------


def _newest_first(events: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
    return events.order_by("-at", "-pk")


def event_page_token(event: AuditEvent) -> str:
    """The opaque token of the page after `event`."""
    raw = f"{event.at.isoformat()}|{event.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(events: QuerySet[AuditEvent], token: str) -> QuerySet[AuditEvent]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        at_text, _, pk_text = raw.partition("|")
        at, pk = datetime.fromisoformat(at_text), int(pk_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise InvalidPageToken(token) from None
    if at.tzinfo is None:
        raise InvalidPageToken(token)
    # The bound on the time alone is where the index range starts; the OR sorts out the ties.
    return events.filter(Q(at__lt=at) | Q(pk__lt=pk), at__lte=at)


def event_page(
    *, events: QuerySet[AuditEvent], after: str = "", size: int = 50
) -> tuple[list[AuditEvent], str]:
    """A page of `events`, newest first, after the page token `after` (InvalidPageToken for
    one the console did not make); with the token of the next page, "" for none."""
    if after:
        events = _after(events, after)
    rows = list(_newest_first(events)[: size + 1])
    if len(rows) <= size:
        return rows, ""
    return rows[:size], event_page_token(rows[size - 1])


def event_chunks(events: QuerySet[AuditEvent], *, size: int = 1000) -> Iterator[list[AuditEvent]]:
    """All of `events`, newest first, a keyset page at a time (an export of any length holds
    one page in memory)."""
    after = ""
    while True:
        rows, after = event_page(events=events, after=after, size=size)
        if rows:
            yield rows
        if not after:
            return


# --- an event as the exports write it ------------------------------------------------------------


class EventRecord(TypedDict):
    at: str
    tenant_id: int | None
    actor: str
    source: str
    action: str
    object_type: str
    object_id: str
    object: str
    changes: dict[str, Any]
    reason: str
    count: int
    last_at: str | None
    sources: list[str]


def event_record_of(event: AuditEvent) -> EventRecord:
    return {
        "at": event.at.isoformat(),
        "tenant_id": event.tenant_id,
        "actor": event.actor,
        "source": event.source,
        "action": event.action,
        "object_type": event.object_type,
        "object_id": event.object_id,
        "object": event.object_label,
        "changes": event.changes or {},
        "reason": event.reason,
        "count": event.count,
        "last_at": event.last_at.isoformat() if event.last_at else None,
        "sources": list(event.sources or []),
    }
