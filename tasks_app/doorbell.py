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


def shared_layer():  # type: ignore[no-untyped-def]
    """The channel layer, if it reaches other processes (Redis); None for the in-memory one."""
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
    layer = shared_layer()
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


class Subscription:
    """This process listening to one group of the channel layer.

    `wait()` returns the next message, or None after `timeout`. One receive stays pending from
    wait to wait, so a message that arrives between two waits is kept for the next (a receive
    cancelled at each timeout would, on the pub/sub layer, unsubscribe and miss it); leaving
    cancels it and lets the channel go. Without a shared channel layer, or once it fails
    (Redis down), `wait()` only sleeps and `channel` is None.
    """

    def __init__(self, group: str) -> None:
        self.group = group
        self.layer: Any = None
        self.channel: str | None = None
        self._receiving: asyncio.Future[dict[str, Any]] | None = None

    async def __aenter__(self) -> Subscription:
        layer = shared_layer()
        if layer is not None:
            try:
                channel = await layer.new_channel()
                self.layer, self.channel = layer, channel
                await layer.group_add(self.group, channel)
            except Exception:  # Redis down: poll instead of failing the caller
                logger.warning("Doorbell unavailable for %s; polling", self.group, exc_info=True)
                await self._leave()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._leave()

    async def join_again(self) -> None:
        """Join the group again (the original Redis layer forgets members after a day)."""
        if self.channel is not None:
            await self.layer.group_add(self.group, self.channel)

    async def wait(self, timeout: float) -> dict[str, Any] | None:
        """The next message, or None when `timeout` passed first."""
        if timeout <= 0:
            return None
        if self.channel is None:
            await asyncio.sleep(timeout)
            return None
        if self._receiving is None:
            self._receiving = asyncio.ensure_future(self.layer.receive(self.channel))
        done, _ = await asyncio.wait((self._receiving,), timeout=timeout)
        if not done:
            return None
        receiving, self._receiving = self._receiving, None
        try:
            return receiving.result()
        except Exception:  # the channel layer went away mid-wait: poll from now on
            logger.warning("Doorbell lost for %s; polling", self.group, exc_info=True)
            await self._leave()
            return None

    async def _leave(self) -> None:
        channel, self.channel = self.channel, None
        if self._receiving is not None:
            self._receiving.cancel()
            await asyncio.gather(self._receiving, return_exceptions=True)
            self._receiving = None
        if channel is None:
            return
        try:
            await self.layer.group_discard(self.group, channel)
            delete = getattr(self.layer, "delete_channel", None)
            if delete is not None:
                await delete(channel)
        except Exception:
            logger.warning("Could not leave doorbell group %s", self.group, exc_info=True)


class Doorbell(Subscription):
    """A waiter's subscription to one task's doorbell."""

    def __init__(self, task_id: uuid.UUID | str) -> None:
        super().__init__(_group(task_id))

    @property
    def interval(self) -> float:
        # With a doorbell, looking at the log is only a safety net, so it can be slow.
        return settings.A2A_POLL_INTERVAL_SECONDS * (5 if self.channel else 1)
