"""Celery jobs of the audit log."""

from __future__ import annotations

from celery import shared_task

from .services import events_delete_expired


@shared_task
def delete_expired_audit_events_task() -> int:
    """Beat's hourly, beside the tasks' retention: the events past `A2A_TASK_RETENTION_DAYS`,
    a batch at a time."""
    deleted = 0
    while batch := events_delete_expired():
        deleted += batch
    return deleted
