"""Installed AgentExecutors, for the `python` executor kind's allowlist and what executors see."""

from __future__ import annotations

from a2a.helpers.proto_helpers import new_text_artifact
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater


class ShoutingExecutor(AgentExecutor):
    def __init__(self, suffix: str = "!") -> None:
        self.suffix = suffix

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        text = context.get_user_input().upper() + self.suffix
        await updater.add_artifact(new_text_artifact("shout", text).parts, name="shout")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class GreetingExecutor(AgentExecutor):
    """Greets with the `greeting` it must be given; `api_key` and `token` stand for what a
    service it calls would need (secrets). For the checks of a constructor's arguments."""

    def __init__(self, greeting: str, *, api_key: str = "", token: str = "") -> None:
        self.greeting = greeting

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        text = f"{self.greeting}, {context.get_user_input()}"
        await updater.add_artifact(new_text_artifact("greeting", text).parts, name="greeting")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class OptionsExecutor(GreetingExecutor):
    """Takes any keyword argument (a greeting among them, else "Hello")."""

    def __init__(self, **options: object) -> None:
        super().__init__(str(options.get("greeting", "Hello")))


class PositionalExecutor(GreetingExecutor):
    """Needs an argument no keyword can give."""

    def __init__(self, greeting: str, /) -> None:
        super().__init__(greeting)


class ExtensionsExecutor(AgentExecutor):
    """Answers with the extensions the client requested, as the executor sees them."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        requested = (
            sorted(context.call_context.requested_extensions) if context.call_context else []
        )
        text = ",".join(requested) or "-"
        await updater.add_artifact(new_text_artifact("extensions", text).parts, name="extensions")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class NotAnExecutor:
    pass


class SleepRecorder(AgentExecutor):
    """Awaits `seconds`, then answers with its own record of the run: the worker process's
    pid, when the run started and ended (wall clock), and which attempt of its turn it was,
    for the runtime's concurrency and worker-loss tests."""

    def __init__(self, seconds: float = 1.0) -> None:
        self.seconds = seconds

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        import asyncio
        import json
        import os
        import time

        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        started = time.time()
        await asyncio.sleep(self.seconds)
        attempt = context.call_context.state.get("attempt") if context.call_context else None
        record = json.dumps(
            {"pid": os.getpid(), "start": started, "end": time.time(), "attempt": attempt}
        )
        await updater.add_artifact(new_text_artifact("run", record).parts, name="run")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class InvalidAfterWork(AgentExecutor):
    """Starts work, adds an artifact, then emits a status update without a state (not valid)
    and would complete: what the platform keeps of a run that went wrong midway."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        from a2a.types import TaskStatusUpdateEvent

        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.start_work()
        await updater.add_artifact(new_text_artifact("half", "half done").parts, name="half")
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(task_id=context.task_id, context_id=context.context_id)
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError
