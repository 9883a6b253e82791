"""The `echo` executor: repeats the user's text as an artifact.

`input_required` makes the first turn ask for more input, so multi-turn can be exercised;
`delay_seconds` makes it slow (and cancellable) so cancel can be exercised.
"""

from __future__ import annotations

import asyncio

from a2a.helpers.proto_helpers import new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Role, TaskState
from pydantic import BaseModel, ConfigDict, Field


class EchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_required: bool = Field(
        default=False, description="Ask for more input on the first turn, then echo everything."
    )
    delay_seconds: float = Field(
        default=0.0, ge=0, le=3600, description="Work this long before answering."
    )


class EchoExecutor(AgentExecutor):
    def __init__(self, config: EchoConfig) -> None:
        self.config = config

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.start_work()
        if self.config.delay_seconds:
            await asyncio.sleep(self.config.delay_seconds)
        task = context.current_task
        user_turns = [m for m in (task.history if task else []) if m.role == Role.ROLE_USER]
        if self.config.input_required and len(user_turns) <= 1:
            await updater.requires_input(
                updater.new_agent_message(
                    new_text_message("Send one more message and I will echo both.").parts
                )
            )
            return
        texts = [_text_of(m) for m in user_turns] or [context.get_user_input()]
        text = "\n".join(t for t in texts if t)
        await updater.add_artifact(new_text_artifact("echo", text).parts, name="echo")
        await updater.complete(updater.new_agent_message(new_text_message(f"Echoed: {text}").parts))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.update_status(TaskState.TASK_STATE_CANCELED)


def _text_of(message) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(p.text for p in message.parts if p.HasField("text"))
