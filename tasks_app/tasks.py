"""Celery jobs: ids in, one service call, idempotent."""

from __future__ import annotations

import uuid
from typing import Any

from celery import shared_task

from .execution import task_run
from .services import tasks_reap


@shared_task(bind=True, acks_late=True, max_retries=None)
def run_agent_task(
    self: Any, task_id: str, position: int, configuration: dict[str, Any] | None = None
) -> str:
    outcome = task_run(
        task_id=uuid.UUID(task_id), position=position, configuration=configuration or {}
    )
    if outcome == "busy":
        # Another run of this task (an earlier turn) still holds it: this turn goes next.
        raise self.retry(countdown=1)
    return outcome


@shared_task
def reap_stuck_tasks_task() -> int:
    return len(tasks_reap())
