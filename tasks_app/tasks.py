"""Celery jobs: ids in, one service call, idempotent."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import TaskState
from celery import shared_task
from celery.signals import worker_shutting_down

from a2a_platform import broker

from . import runtime
from .lanes import lanes_refill
from .services import (
    sent_messages_forget,
    task_end,
    tasks_delete_expired,
    tasks_reap,
    tasks_requeue_lost_jobs,
)

# A turn waits for the previous run to release the task; that is a moment, not minutes.
BUSY_RETRIES = 60


@shared_task(bind=True, acks_late=True, max_retries=BUSY_RETRIES)
def run_agent_task(
    self: Any,
    task_id: str,
    position: int,
    configuration: dict[str, Any] | None = None,
    extensions: list[str] | None = None,
) -> str:
    """Run the agent on this process's event loop; the thread waits for the run to end."""
    outcome = runtime.runtime().run_job(
        task_id=uuid.UUID(task_id),
        job_id=self.request.id,
        position=position,
        configuration=configuration or {},
        extensions=extensions or [],
    )
    if outcome == "busy":
        if self.request.retries >= BUSY_RETRIES:
            task_end(
                task_id=uuid.UUID(task_id),
                state=TaskState.TASK_STATE_FAILED,
                reason="The previous turn's run never released the task; this turn was dropped.",
            )
            return "gave up"
        raise self.retry(countdown=1)
    return outcome


@shared_task(acks_late=True)
def cancel_outside_run_task(task_id: str) -> str:
    """Run the executor's cancel() for a task canceled while no run was under way."""
    return runtime.runtime().cancel_outside_run(task_id=uuid.UUID(task_id))


@worker_shutting_down.connect
def _drain_on_warm_shutdown(sig: str, how: str, exitcode: int, **_: Any) -> None:
    if how == "Warm":
        runtime.drain()


@shared_task
def reap_stuck_tasks_task() -> int:
    """Beat's every `A2A_REAPER_INTERVAL_SECONDS`: runs whose worker died, runs whose queued
    job the broker lost, messageIds past their retention, and runs waiting in a lane that has
    room (a hand-over lost with a process)."""
    requeued = tasks_requeue_lost_jobs(broker_started_at=broker.started_at())
    sent_messages_forget()
    return len(tasks_reap()) + len(requeued) + lanes_refill()


@shared_task
def delete_expired_tasks_task() -> int:
    """Beat's hourly: the tasks past `A2A_TASK_RETENTION_DAYS`, a batch at a time."""
    deleted = 0
    while batch := tasks_delete_expired():
        deleted += batch
    return deleted
