"""The doorbell: a channel-layer message that says "task X has new events".

Postgres is the truth; the doorbell only lets waiters wake early. Without a cross-process
channel layer (the embedded profile's in-memory layer) nobody rings and waiters poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

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
    layer = _shared_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            _group(task_id), {"type": "task.event", "seq": seq, "kind": kind, "state": state}
        )
    except Exception:  # a missed ring only costs latency: waiters also poll
        logger.warning("Doorbell for task %s failed", task_id, exc_info=True)


def runner_group(runner: str) -> str:
    """The group a worker process listens on for cancel requests of the runs it holds."""
    return f"runner.{runner}"


def ring_runner(runner: str, task_id: uuid.UUID | str) -> None:
    """Tell worker `runner` that the task it runs is to be canceled."""
    layer = _shared_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(
            runner_group(runner), {"type": "task.cancel", "task": str(task_id)}
        )
    except Exception:  # the worker's heartbeat finds the cancel request in the database
        logger.warning("Cancel doorbell for task %s failed", task_id, exc_info=True)


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
