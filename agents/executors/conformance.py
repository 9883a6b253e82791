"""The `conformance` executor: deterministic answers for the A2A TCK, routed by messageId prefix."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Part, TaskState
from google.protobuf.struct_pb2 import Struct, Value
from pydantic import BaseModel, ConfigDict, Field


class ConformanceConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step_seconds: float = Field(
        default=0.5, ge=0, le=60, description="Pause between the default scenario's states."
    )
    resubscribe_wait_seconds: float = Field(
        default=4.0, ge=0, le=600, description="How long `test-resubscribe-message-id` works."
    )


Scenario = Callable[[RequestContext, TaskUpdater, EventQueue], Awaitable[None]]

_STREAM_TEXTS = {
    "tck-stream-001": "Stream hello from TCK",
    "tck-stream-003": "Stream task lifecycle",
    "tck-stream-ordering-001": "Ordered output",
    "tck-stream-artifact-text": "Streamed text content",
}


def _text(text: str) -> Part:
    return Part(text=text)


class ConformanceExecutor(AgentExecutor):
    def __init__(self, config: ConformanceConfig) -> None:
        self.config = config

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        message_id = context.message.message_id if context.message else ""
        await self._scenario_for(message_id, context)(context, updater, event_queue)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.update_status(TaskState.TASK_STATE_CANCELED)

    def _scenario_for(self, message_id: str, context: RequestContext) -> Scenario:
        table: list[tuple[str, Scenario]] = [
            ("tck-complete-task", self._complete_task),
            ("tck-artifact-text", self._artifact(lambda: [_text("Generated text content")])),
            (
                "tck-artifact-file-url",
                self._artifact(
                    lambda: [
                        Part(
                            url="https://example.com/output.txt",
                            filename="output.txt",
                            media_type="text/plain",
                        )
                    ]
                ),
            ),
            (
                "tck-artifact-file",
                self._artifact(
                    lambda: [
                        Part(
                            raw=b"Generated file content",
                            filename="output.txt",
                            media_type="text/plain",
                        )
                    ]
                ),
            ),
            (
                "tck-artifact-data",
                self._artifact(
                    lambda: [Part(data=Value(struct_value=_struct({"key": "value", "count": 42})))]
                ),
            ),
            ("tck-message-response", self._message_response),
            ("tck-input-required", self._input_required),
            ("tck-reject-task", self._reject),
            ("tck-stream-artifact-chunked", self._stream_chunked),
            (
                "tck-stream-artifact-file",
                self._stream_artifact(
                    lambda: [
                        Part(
                            raw=b"Streamed file content",
                            filename="output.txt",
                            media_type="text/plain",
                        )
                    ]
                ),
            ),
            ("tck-stream-002", self._complete_only),
            ("test-resubscribe-message-id", self._resubscribe),
            # The v0.3 TCK cancels these tasks, or continues them, after its blocking send:
            # they wait for input, so they are still open then.
            ("text-message-id", self._input_required),
            ("cancel-test-message-id", self._input_required),
            ("mapping-test-message-id", self._input_required),
            ("test-history-", self._input_required),
        ]
        for prefix, text in _STREAM_TEXTS.items():
            table.append((prefix, self._stream_artifact(lambda text=text: [_text(text)])))
        # Longest prefix first, so `tck-artifact-file-url` is not taken for `tck-artifact-file`.
        for prefix, scenario in sorted(table, key=lambda item: -len(item[0])):
            if message_id.startswith(prefix):
                return scenario
        # A follow-up without a known prefix to a task that asked for input completes it.
        task = context.current_task
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            return self._complete_after_input
        return self._default

    async def _complete_task(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.complete(up.new_agent_message([_text("Hello from TCK")]))

    async def _complete_after_input(
        self, ctx: RequestContext, up: TaskUpdater, q: EventQueue
    ) -> None:
        await up.complete(up.new_agent_message([_text("Input received, task completed")]))

    async def _complete_only(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.complete()

    def _artifact(self, parts: Callable[[], list[Part]]) -> Scenario:
        async def scenario(ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
            await up.add_artifact(parts(), name="output")
            await up.complete()

        return scenario

    def _stream_artifact(self, parts: Callable[[], list[Part]]) -> Scenario:
        async def scenario(ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
            await up.start_work()
            await up.add_artifact(parts(), name="output", last_chunk=True)
            await up.complete()

        return scenario

    async def _stream_chunked(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.start_work()
        await up.add_artifact(
            [_text("chunk-1 ")], artifact_id="chunked", name="output", last_chunk=False
        )
        await up.add_artifact(
            [_text("chunk-2")], artifact_id="chunked", name="output", append=True, last_chunk=True
        )
        await up.complete()

    async def _message_response(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await q.enqueue_event(
            new_text_message("Direct message response", context_id=ctx.context_id)
        )

    async def _input_required(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.requires_input(up.new_agent_message([_text("Please provide more input")]))

    async def _reject(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.reject(up.new_agent_message([_text("rejected")]))

    async def _resubscribe(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        await up.start_work()
        await asyncio.sleep(self.config.resubscribe_wait_seconds)
        await up.complete()

    async def _default(self, ctx: RequestContext, up: TaskUpdater, q: EventQueue) -> None:
        user_text = ctx.get_user_input()
        await up.submit()
        await asyncio.sleep(self.config.step_seconds)
        await up.start_work()
        await asyncio.sleep(self.config.step_seconds)
        reply = f'Hello! You said: "{user_text}"'
        await up.add_artifact([_text(reply)], name="response")
        await up.complete(up.new_agent_message([_text(reply)]))


def _struct(value: dict[str, object]) -> Struct:
    struct = Struct()
    struct.update(value)
    return struct
