"""Celery jobs for push delivery: ids in, one service call, idempotent."""

from __future__ import annotations

import uuid

from celery import shared_task

from .delivery import deliveries_due, deliveries_run


@shared_task(acks_late=True)
def push_deliver_task(config_id: str) -> None:
    """Deliver a config's due deliveries in order; come back when a retry is due."""
    retry_at = deliveries_run(config_pk=uuid.UUID(config_id))
    if retry_at is not None:
        push_deliver_task.apply_async(args=[config_id], eta=retry_at)


@shared_task
def push_dispatch_due_task() -> int:
    """Beat's sweep: queue every config with a due delivery (a lost job, a dead worker's
    half-sent delivery, a retry whose timer was lost with a broker restart)."""
    configs = deliveries_due()
    for config_pk in configs:
        push_deliver_task.delay(str(config_pk))
    return len(configs)
