"""Writes of the audit log: an event, the counts of refused credentials added to their hour's
rows, and retention. Nothing else changes or deletes a row (AuditEvent is append-only)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from agents.models import Agent, Tenant

from .context import Actor, current_actor
from .failures import FailureKey, Failures, sources_add
from .models import AUTH_FAILURE, AuditEvent

LABEL_MAX = 300
OBJECT_ID_MAX = 64
# How long a write of counts waits for a lock before it gives up and keeps them for the next.
LOCK_TIMEOUT_MS = 500


def event_record(
    *,
    tenant_id: int | None,
    action: str,
    object_type: str,
    object_id: str = "",
    object_label: str = "",
    changes: Mapping[str, Any] | None = None,
    actor: Actor | None = None,
) -> AuditEvent:
    """Add an event to the log, as `actor` (default: who is acting now, audit.context), in the
    caller's transaction: a change rolled back takes its record with it."""
    actor = actor or current_actor()
    return AuditEvent.objects.create(
        tenant_id=tenant_id,
        actor=actor.name,
        actor_user_id=actor.user_id,
        source=actor.source,
        action=action,
        object_type=object_type,
        object_id=object_id[:OBJECT_ID_MAX],
        object_label=_cut(object_label, LABEL_MAX),
        changes=dict(changes or {}),
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- refused credentials, counted per hour -----------------------------------------------------


def failure_bucket(key: FailureKey) -> str:
    """The row a key's counts go to, as a unique text: a digest, since its parts may be null."""
    tenant_id, agent_id, reason, hour = key
    text = f"{tenant_id}\x00{agent_id}\x00{reason}\x00{hour.isoformat()}"
    return hashlib.sha256(text.encode()).hexdigest()


def auth_failures_add(batch: Mapping[FailureKey, Failures]) -> None:
    """Add counted refusals to their hours' rows, made when missing, in one transaction (so a
    batch is added whole or not at all). Two processes adding to the same row lock it in turn:
    each made sure it exists first, then adds under the row's lock."""
    by_bucket = {failure_bucket(key): (key, failures) for key, failures in batch.items()}
    labels = _failure_labels(batch.keys())
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        AuditEvent.objects.bulk_create(
            [
                _failure_row(bucket, key, failures.first, labels)
                for bucket, (key, failures) in sorted(by_bucket.items())
            ],
            ignore_conflicts=True,
        )
        rows = AuditEvent.objects.select_for_update().filter(bucket__in=by_bucket).order_by("pk")
        for row in rows.only("pk", "bucket", "count", "at", "last_at", "sources"):
            _, failures = by_bucket[row.bucket]
            sources = list(row.sources or [])
            sources_add(sources, failures.sources)
            # The one update of the log: an hour's count grows while the hour lasts. Django's
            # own update, which AuditEventQuerySet refuses everyone else.
            models.QuerySet.update(
                AuditEvent.objects.filter(pk=row.pk),
                count=row.count + failures.count,
                at=min(row.at, failures.first),
                last_at=max(row.last_at or failures.last, failures.last),
                sources=sources,
                source=sources[0] if sources else "",
            )


def _failure_labels(keys: Any) -> dict[tuple[str, int], str]:
    """How each agent and tenant is named on its rows: its path as it was when counted."""
    agent_ids = {agent for _, agent, _, _ in keys if agent is not None}
    tenant_ids = {tenant for tenant, _, _, _ in keys if tenant is not None}
    labels: dict[tuple[str, int], str] = {}
    for pk, tenant_slug, slug in Agent.objects.filter(pk__in=agent_ids).values_list(
        "pk", "tenant__slug", "slug"
    ):
        labels["agent", pk] = f"{tenant_slug}/{slug}"
    for pk, slug in Tenant.objects.filter(pk__in=tenant_ids).values_list("pk", "slug"):
        labels["tenant", pk] = slug
    return labels


def _failure_row(
    bucket: str, key: FailureKey, first: datetime, labels: dict[tuple[str, int], str]
) -> AuditEvent:
    tenant_id, agent_id, reason, _ = key
    if agent_id is not None:
        kind, object_id = "agent", agent_id
    elif tenant_id is not None:
        kind, object_id = "tenant", tenant_id
    else:
        kind, object_id = "login", None
    label = "console and admin login" if object_id is None else labels.get((kind, object_id), "")
    return AuditEvent(
        bucket=bucket,
        tenant_id=tenant_id,
        at=first,
        actor="unauthenticated",
        source="",
        action=AUTH_FAILURE,
        object_type=kind,
        object_id="" if object_id is None else str(object_id),
        object_label=label or f"{kind} {object_id}",
        reason=reason,
        count=0,
        last_at=first,
        sources=[],
    )


# --- retention -----------------------------------------------------------------------------------


def events_delete_expired(*, now: datetime | None = None, batch: int = 1000) -> int:
    """Delete up to `batch` of the oldest events older than `A2A_TASK_RETENTION_DAYS` (the
    tasks' retention: the log keeps what the tasks keep); 0 when retention is off. The only
    deletion of the log."""
    days = settings.A2A_TASK_RETENTION_DAYS
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    expired = AuditEvent.objects.filter(at__lt=cutoff).order_by("at", "pk")[:batch]
    ids = list(expired.values_list("pk", flat=True))
    if not ids:
        return 0
    deleted, _ = models.QuerySet.delete(AuditEvent.objects.filter(pk__in=ids))
    return deleted
