"""The doorbell: a channel-layer message that says "task X has new events".

Postgres is the truth; the doorbell only lets waiters wake early. Without a cross-process
channel layer (the embedded profile's in-memory layer) nobody rings and waiters poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
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


def ring(task_id: uuid.UUID | str, seq: int) -> None:
    layer = _shared_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(_group(task_id), {"type": "task.event", "seq": seq})
    except Exception:  # a missed ring only costs latency: waiters also poll
        logger.warning("Doorbell for task %s failed", task_id, exc_info=True)


async def wait_until(task_id: uuid.UUID, done: Callable[[str, int], bool], timeout: float) -> None:
    """Return when done(state, status_seq) holds for the task, or when `timeout` runs out."""
    from .selectors import task_progress

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    layer, channel = await _subscribe(task_id)
    # With a doorbell the poll is only a safety net, so it can be slow.
    interval = settings.A2A_POLL_INTERVAL_SECONDS * (5 if channel else 1)
    try:
        while True:
            state, status_seq = await database_sync_to_async(task_progress)(task_id=task_id)
            if done(state, status_seq):
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                return
            pause = min(remaining, interval)
            if channel is None:
                await asyncio.sleep(pause)
                continue
            try:
                await asyncio.wait_for(layer.receive(channel), pause)
            except TimeoutError:
                pass
            except Exception:  # the channel layer went away: poll instead
                logger.warning("Doorbell lost for task %s; polling", task_id, exc_info=True)
                channel, interval = None, settings.A2A_POLL_INTERVAL_SECONDS
    finally:
        if channel is not None:
            try:
                await layer.group_discard(_group(task_id), channel)
            except Exception:
                logger.warning("Could not leave the doorbell group of %s", task_id, exc_info=True)


async def _subscribe(task_id: uuid.UUID):  # type: ignore[no-untyped-def]
    """The layer and a channel in the task's doorbell group, or (None, None) to poll."""
    layer = _shared_layer()
    if layer is None:
        return None, None
    try:
        channel = await layer.new_channel()
        await layer.group_add(_group(task_id), channel)
    except Exception:  # Redis down: the task is committed already, so poll rather than fail
        logger.warning("Doorbell unavailable for task %s; polling", task_id, exc_info=True)
        return None, None
    return layer, channel
