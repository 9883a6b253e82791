"""What the platform gives a run beyond the a2a-sdk's RequestContext: the `openai`, `a2a-proxy`
and `webhook` kinds need the conversation's earlier tasks, a place to keep state between the
turns of a task, and a way to wait for events that arrive from outside the run.

The platform (tasks_app.execution) puts a `PlatformRun` into the run's
`context.call_context.state` under STATE_KEY; `platform_run(context)` takes it out. An
executor written for the SDK alone never needs it.
"""

from __future__ import annotations

from typing import Any, Protocol

from a2a.server.agent_execution import RequestContext
from a2a.types import Message

STATE_KEY = "a2a_platform.run"


class PlatformRun(Protocol):
    task_id: str
    context_id: str
    # The agent's place, "<tenant>/<agent>", and the task's owner (the caller's principal).
    agent_path: str
    owner: str

    async def conversation(self, *, earlier: int) -> list[Message]:
        """The last `earlier` messages of the conversation's earlier tasks (same agent, owner
        and contextId), oldest first; this task's own history is the RequestContext's."""

    async def state(self) -> dict[str, Any]:
        """What the executor kept for this task on an earlier run; {} at first."""

    async def state_save(self, data: dict[str, Any]) -> None:
        """Keep `data` for this task's next run (replaces what was kept)."""

    async def context_state(self) -> dict[str, Any]:
        """What the executor kept for the latest earlier task of the conversation; {}."""

    async def events_mark(self) -> int:
        """Store the events enqueued so far; the task's last event number."""

    async def wait_settled(self, *, after: int, timeout: float) -> bool:
        """Wait until an event after `after` settles the task (a terminal or interrupted
        state), written by anyone; False if `timeout` seconds pass first."""


def platform_run(context: RequestContext) -> PlatformRun:
    """The run's platform handle. Raises RuntimeError outside the platform's runs."""
    run = context.call_context.state.get(STATE_KEY) if context.call_context else None
    if run is None:
        raise RuntimeError("This executor runs only on the platform (no PlatformRun in context).")
    return run  # type: ignore[no-any-return]
