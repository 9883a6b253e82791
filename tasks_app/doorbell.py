"""The doorbell: a channel-layer message that says "task X has new events".

Postgres is the truth; the doorbell only lets waiters wake early. Every task's rings go to one
group, which each process that waits on tasks joins once (its hub, `_Hub`): a waiter is a local
entry, not a subscription of its own, so a blocking send or a stream costs Redis nothing but
the one PUBLISH of each ring. Without a cross-process channel layer (the embedded profile's
in-memory layer) nobody rings and waiters poll.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings

from a2a_platform.db import caller_loop
from a2a_platform.metrics import DOORBELL_WAITERS

logger = logging.getLogger(__name__)


# The group every task's rings go to; each process with waiters joins it once.
TASKS_GROUP = "doorbell.tasks"


def shared_layer():  # type: ignore[no-untyped-def]
    """The channel layer, if it reaches other processes (Redis); None for the in-memory one."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    return layer


def ring(task_id: uuid.UUID | str, seq: int, kind: str = "", state: str = "") -> None:
    """Say that event `seq` (of `kind`, leaving the task in `state`) was written, so a waiter
    for the task's end need not read the log for an event that does not end it."""
    task = uuid.UUID(str(task_id)).hex
    message = {"type": "task.event", "task": task, "seq": seq, "kind": kind, "state": state}
    # A missed ring only costs latency: waiters also poll.
    _send(TASKS_GROUP, message, f"Doorbell for task {task_id}")


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

    def __init__(self, group: str, prefix: str = "specific.") -> None:
        self.group = group
        self.prefix = prefix
        self.layer: Any = None
        self.channel: str | None = None
        self._receiving: asyncio.Future[dict[str, Any]] | None = None

    async def __aenter__(self) -> Subscription:
        layer = shared_layer()
        if layer is not None:
            try:
                channel = await layer.new_channel(self.prefix)
                self.layer, self.channel = layer, channel
                await layer.group_add(self.group, channel)
            except Exception:  # Redis down: poll instead of failing the caller
                logger.warning("Doorbell unavailable for %s; polling", self.group, exc_info=True)
                await self._leave()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._leave()

    async def messages(self, rejoin: float) -> AsyncIterator[dict[str, Any]]:
        """The group's messages as they arrive, until the subscription is lost (Redis away).
        The group is joined again every `rejoin` seconds: the original Redis layer forgets
        members after a day, and Redis may have restarted."""
        loop = asyncio.get_running_loop()
        joined = loop.time()
        while self.channel is not None:
            message = await self.wait(rejoin)
            if message is not None:
                yield message
            if self.channel is None or loop.time() - joined < rejoin:
                continue
            try:
                await self.layer.group_add(self.group, self.channel)
                joined = loop.time()
            except Exception:
                logger.warning("Doorbell lost for %s", self.group, exc_info=True)
                await self._leave()

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


class Doorbell:
    """A waiter for one task's rings, in this process's hub (`async with`).

    `wait()` returns the next ring for the task, or None after `timeout`; a ring that arrives
    between two waits is kept for the next. When the hub is not listening (no shared channel
    layer, Redis unreachable) `listening` is False and `wait()` only sleeps: the caller polls.
    """

    def __init__(self, task_id: uuid.UUID | str) -> None:
        self.task = uuid.UUID(str(task_id)).hex
        self._hub: _Hub | None = None
        self._rings: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def __aenter__(self) -> Doorbell:
        self._hub = await _hub()
        if self._hub is not None:
            self._hub.add(self)
            last = self._hub.recent.get(self.task)
            if last is not None:  # rung before this waiter came: it is the next ring
                self._rings.put_nowait(last)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._hub is not None:
            self._hub.discard(self)
            self._hub = None

    @property
    def listening(self) -> bool:
        return self._hub is not None and self._hub.listening

    @property
    def interval(self) -> float:
        # With a doorbell, looking at the log is only a safety net, so it can be slow.
        return settings.A2A_POLL_INTERVAL_SECONDS * (5 if self.listening else 1)

    async def wait(self, timeout: float) -> dict[str, Any] | None:
        """The next ring for the task, or None when `timeout` passed first."""
        if timeout <= 0:
            return None
        if not self.listening and self._rings.empty():
            await asyncio.sleep(timeout)
            return None
        try:
            async with asyncio.timeout(timeout):
                return await self._rings.get()
        except TimeoutError:
            return None


# After the hub could not start (Redis unreachable), waiters poll this long before the next try.
_HUB_RETRY_SECONDS = 5.0
# The last ring of this many tasks is kept for waiters that come after it.
_RECENT_RINGS = 10_000
# A hub listening this long is surely subscribed (Redis runs a SUBSCRIBE as it reads it).
_SETTLED_SECONDS = 1.0


class _Hub:
    """One event loop's membership of the tasks group: it hands each ring to the waiters of
    its task in this process. Started by the first waiter, it stays for the loop's life."""

    def __init__(self) -> None:
        self.bell = Subscription(TASKS_GROUP, prefix="doorbell.")
        self.waiters: dict[str, set[Doorbell]] = {}
        self.recent: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.listening_since: float | None = None
        self.failed_at: float | None = None
        self.started: asyncio.Future[None] | None = None
        self._listener: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        return self.bell.channel is not None

    def add(self, bell: Doorbell) -> None:
        self.waiters.setdefault(bell.task, set()).add(bell)
        DOORBELL_WAITERS.inc()

    def discard(self, bell: Doorbell) -> None:
        bells = self.waiters.get(bell.task)
        if bells is not None and bell in bells:
            bells.remove(bell)
            DOORBELL_WAITERS.dec()
            if not bells:
                del self.waiters[bell.task]

    async def start(self) -> None:
        await self.bell.__aenter__()
        if self.listening:
            self.listening_since = asyncio.get_running_loop().time()
            self._listener = asyncio.ensure_future(self._listen())
        else:
            self.failed_at = asyncio.get_running_loop().time()

    async def _listen(self) -> None:
        async for message in self.bell.messages(rejoin=30):
            if message.get("type") != "task.event":
                continue
            task = message.get("task", "")
            self.recent[task] = message
            self.recent.move_to_end(task)
            if len(self.recent) > _RECENT_RINGS:
                self.recent.popitem(last=False)
            for bell in self.waiters.get(task, ()):
                bell._rings.put_nowait(message)
        self.failed_at = asyncio.get_running_loop().time()  # its waiters poll from now on


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Hub] = weakref.WeakKeyDictionary()


async def hearing_every_ring() -> bool:
    """Whether this process hears every ring from now on (bar a Redis failure): its hub has
    been listening a while. A waiter that starts after a task changed still gets the ring of
    the change (the hub keeps each task's last ring), so it need not read the log first."""
    hub = await _hub()
    if hub is None or not hub.listening or hub.listening_since is None:
        return False
    return asyncio.get_running_loop().time() - hub.listening_since >= _SETTLED_SECONDS


async def _hub() -> _Hub | None:
    """This event loop's hub, started on first use; None without a shared channel layer."""
    if shared_layer() is None:
        return None
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is not None and hub.failed_at is not None:
        if loop.time() - hub.failed_at < _HUB_RETRY_SECONDS:
            return hub  # not listening: its waiters poll
        hub = None  # try again
    if hub is None:
        hub = _hubs[loop] = _Hub()
        hub.started = asyncio.ensure_future(hub.start())
    assert hub.started is not None
    # Shielded: a waiter cancelled while the hub starts does not stop it for the others.
    await asyncio.shield(hub.started)
    return hub
