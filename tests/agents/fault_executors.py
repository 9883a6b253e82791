"""Installed AgentExecutors for the fault suite (faults/) and the topology test: agents slow
enough that a process can die while they run, and that say in every event which run wrote it."""

from __future__ import annotations

import asyncio

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState


def attempt_of(context: RequestContext) -> int:
    """Which attempt at the task this run is (1 unless the platform ran it again after losing
    a worker: it passes the attempt in the call context's state)."""
    state = context.call_context.state if context.call_context else {}
    return int(state.get("attempt", 1) or 1)


class StepsExecutor(AgentExecutor):
    """Works in `steps` steps `seconds` apart, one artifact per step, then completes.

    Each artifact's id and text name the attempt and the step (`attempt 2 step 3`), so a fault
    trial tells a step a run wrote twice (a duplicate) from a step that a second attempt, after
    a lost worker, wrote again (expected)."""

    def __init__(self, steps: int = 6, seconds: float = 0.5) -> None:
        self.steps = steps
        self.seconds = seconds

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        attempt = attempt_of(context)
        await updater.start_work(updater.new_agent_message([Part(text=f"attempt {attempt}")]))
        for step in range(1, self.steps + 1):
            await asyncio.sleep(self.seconds)
            await updater.add_artifact(
                [Part(text=f"attempt {attempt} step {step}")],
                artifact_id=f"attempt-{attempt}-step-{step}",
                name="step",
            )
        await updater.complete(updater.new_agent_message([Part(text=f"done in attempt {attempt}")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.update_status(TaskState.TASK_STATE_CANCELED)
