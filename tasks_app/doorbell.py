"""The doorbell: a channel-layer message that says "task X has new events".

Postgres is the truth; the doorbell only lets waiters wake early. Without a cross-process
channel layer (the embedded profile's in-memory layer) nobody rings and waiters poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from a2a_platform.db import caller_loop

logger = logging.getLogger(__name__)


def _group(task_id: uuid.UUID | str) -> str:
    return f"task.{uuid.UUID(str(task_id)).hex}"


def _shared_layer():  # type: ignore[no-untyped-def]
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    return layer


def ring(task_id: uuid.UUID | str, seq: int, kind: str = "", state: str = "") -> None:
    """Say that event `seq` (of `kind`, leaving the task in `state`) was written, so a waiter
    for the task's end need not read the log for an event that does not end it."""
    message = {"type": "task.event", "seq": seq, "kind": kind, "state": state}
    # A missed ring only costs latency: waiters also poll.
    _send(_group(task_id), message, f"Doorbell for task {task_id}")


def runner_group(runner: str) -> str:
    """The group a worker process listens on for cancel requests of the runs it holds."""
    return f"runner.{runner}"


def ring_runner(runner: str, task_id: uuid.UUID | str) -> None:
    """Tell worker `runner` that the task it runs is to be canceled."""
    # If it is missed, the worker's heartbeat finds the cancel request in the database.
    message = {"type": "task.cancel", "task": str(task_id)}
    _send(runner_group(runner), message, f"Cancel doorbell for task {task_id}")


# Rings under way on this process's event loop (asyncio keeps only weak references to tasks),
# and how many may talk to Redis at once: a backlog of runs must not open a connection each.
_sending: set[asyncio.Task[None]] = set()
_SENDERS = 8
# Rings waiting for a sender beyond this (Redis stalled) are dropped, and said so: waiters
# then find the events by polling, as they do when a ring is lost.
_MAX_WAITING = 10_000
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _send(group: str, message: dict[str, Any], what: str) -> None:
    """group_send `message`. On a database thread (a2a_platform.db), where rings are made after
    a commit, it is handed to the event loop that made the call, and the thread goes on at
    once instead of waiting for Redis; elsewhere (sync code, tests) it is sent before
    returning."""
    layer = _shared_layer()
    if layer is None:
        return
    loop = caller_loop()
    if loop is not None and not loop.is_closed():
        try:
            loop.call_soon_threadsafe(_start, layer, group, message, what)
        except RuntimeError:  # the loop closed meanwhile: the process is stopping
            logger.warning("%s not sent: the event loop has closed", what)
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:
        logger.warning("%s failed", what, exc_info=True)


def _start(layer: Any, group: str, message: dict[str, Any], what: str) -> None:
    if len(_sending) >= _MAX_WAITING:
        logger.warning("%s dropped: %d rings are waiting for Redis", what, len(_sending))
        return
    task = asyncio.ensure_future(_group_send(layer, group, message, what))
    _sending.add(task)
    task.add_done_callback(_sending.discard)


async def _group_send(layer: Any, group: str, message: dict[str, Any], what: str) -> None:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:  # one per event loop: a semaphore belongs to the loop it waits on
        gate = _gates[loop] = asyncio.Semaphore(_SENDERS)
    try:
        async with gate:
            await layer.group_send(group, message)
    except Exception:
        logger.warning("%s failed", what, exc_info=True)


class Doorbell:
    """A waiter's subscription to one task's doorbell.

    `wait()` returns when the bell rings or after `timeout`. Without a shared channel layer, or
    once it fails (Redis down), it only sleeps, and `interval` says how often to look instead.
    """

    def __init__(self, task_id: uuid.UUID | str) -> None:
        self.group = _group(task_id)
        self.layer = None
        self.channel: str | None = None

    @property
    def interval(self) -> float:
        # With a doorbell, looking at the log is only a safety net, so it can be slow.
        return settings.A2A_POLL_INTERVAL_SECONDS * (5 if self.channel else 1)

    async def __aenter__(self) -> Doorbell:
        layer = _shared_layer()
        if layer is not None:
            try:
                channel = await layer.new_channel()
                await layer.group_add(self.group, channel)
                self.layer, self.channel = layer, channel
            except Exception:  # Redis down: poll instead of failing the caller
                logger.warning("Doorbell unavailable for %s; polling", self.group, exc_info=True)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.channel is not None:
            try:
                await self.layer.group_discard(self.group, self.channel)
            except Exception:
                logger.warning("Could not leave doorbell group %s", self.group, exc_info=True)

    async def wait(self, timeout: float) -> dict[str, Any] | None:
        """The ring's message (`ring`'s fields), or None when `timeout` passed first."""
        if timeout <= 0:
            return None
        if self.channel is None:
            await asyncio.sleep(timeout)
            return None
        try:
            return await asyncio.wait_for(self.layer.receive(self.channel), timeout)
        except TimeoutError:
            return None
        except Exception:  # the channel layer went away mid-wait: poll from now on
            logger.warning("Doorbell lost for %s; polling", self.group, exc_info=True)
            self.channel = None
            return None
