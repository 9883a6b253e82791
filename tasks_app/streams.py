"""Following a task's event log: the one mechanism behind streams, blocking sends and cancels.

The log (TaskEvent rows, one sequence per task) is the source; the doorbell only says when to
look again. A follower remembers the last seq it handed out, so a reconnecting client that
names it (`Last-Event-ID`) misses nothing and sees nothing twice.

When the process drains (a2a_platform.drain) and its grace is over, a follower stops waiting:
`settled` returns as at its deadline, and `events` stops with `drained` set, so that the
stream's owner can tell the client to resume elsewhere.

When the database is lost (a restart, a failover), a follower's read finds nothing and it waits
on, as for a quiet task, reading again at the next ring or interval; only a database away for
longer than `DATABASE_WAIT_SECONDS` ends the stream (or the wait) with the error.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from typing import Any

from a2a.types import StreamResponse
from google.protobuf.json_format import ParseDict

from a2a_platform import drain
from a2a_platform.db import DATABASE_WAIT_SECONDS, database_lost, db

from .doorbell import Doorbell
from .models import INTERRUPTED_STATES, TERMINAL_STATES, TaskEvent
from .selectors import task_event_states_after, task_events_after

logger = logging.getLogger(__name__)

SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES
EVENTS_PER_READ = 100


@dataclass(frozen=True)
class StreamItem:
    task_id: uuid.UUID
    seq: int
    response: StreamResponse
    final: bool

    @property
    def event_id(self) -> str:
        """The SSE `id:` of this item, which a client sends back as `Last-Event-ID`."""
        return f"{self.task_id}:{self.seq}"


def is_final(kind: str, state: str, ends_at: Collection[str]) -> bool:
    if kind == TaskEvent.Kind.MESSAGE:
        return True  # a direct reply ends the exchange
    return kind in (TaskEvent.Kind.STATUS, TaskEvent.Kind.TASK) and state in ends_at


class EventFollower:
    """Hands out a task's events after `seq`, waiting for new ones as they are written."""

    def __init__(
        self, task_id: uuid.UUID, seq: int, ends_at: Collection[str] = SETTLED_STATES
    ) -> None:
        self.task_id = task_id
        self.seq = seq
        self.ends_at = ends_at
        # `events` stopped because the process drains, not at a final event or its deadline.
        self.drained = False
        self._bell = Doorbell(task_id)
        self._lost_since: float | None = None  # when reads began to find the database lost

    async def __aenter__(self) -> EventFollower:
        await self._bell.__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._bell.__aexit__(*exc_info)

    async def _ring(self, timeout: float) -> dict[str, Any] | None:
        """The doorbell's next ring for the task; None after `timeout`, or at once when the
        process's drain ends its waits."""
        try:
            async with drain.watch():
                return await self._bell.wait(timeout)
        except TimeoutError:
            return None

    async def _read(self, read: Callable[..., list[Any]], **kwargs: Any) -> list[Any]:
        """`read` of the log after `seq`: no rows while the database is lost, for up to
        `DATABASE_WAIT_SECONDS` in a row."""
        try:
            rows = await db(read)(task_id=self.task_id, after_seq=self.seq, **kwargs)
        except Exception as exc:
            now = asyncio.get_running_loop().time()
            if not database_lost(exc):
                raise
            if self._lost_since is None:
                self._lost_since = now
                logger.warning("Task %s: the database is lost; its follower waits", self.task_id)
            elif now - self._lost_since > DATABASE_WAIT_SECONDS:
                raise
            return []
        self._lost_since = None
        return rows

    async def settled(self, *, deadline: float, read_first: bool = True) -> None:
        """Return once an event after `seq` ends the wait (or at `deadline`), without reading
        the events' content: the log's kinds and states are read at the start and whenever
        the doorbell stays quiet for its safety-net interval (every poll interval, without a
        doorbell); a ring that says a final event came ends the wait at once. What a blocking
        send, and a cancel waiting for its worker, wait with; a drain ends the wait early.
        `read_first=False` skips the first read when the doorbell heard every ring since `seq`
        was the last (`hearing_every_ring()` before it was written)."""
        loop = asyncio.get_running_loop()
        read = read_first
        while True:
            rows = []
            if read:
                rows = await self._read(task_event_states_after)
            read = True
            for seq, kind, state in rows:
                self.seq = seq
                if is_final(kind, state, self.ends_at):
                    return
            while True:
                now = loop.time()
                if now >= deadline or drain.over():
                    return
                rung = await self._ring(min(self._bell.interval, deadline - now))
                if rung is None or not rung.get("kind"):
                    break  # quiet (or a ring that does not say): look at the log
                if rung.get("seq", 0) > self.seq and is_final(
                    rung["kind"], rung.get("state", ""), self.ends_at
                ):
                    return

    async def events(
        self,
        *,
        idle: float | None = None,
        deadline: float | None = None,
        read_first: bool = True,
    ) -> AsyncIterator[StreamItem | None]:
        """Yield the next events until one is final. Yield None after `idle` seconds with
        nothing to say (for keep-alives); stop quietly at `deadline` (a loop time), or when
        the process's drain is over (then `drained` is set).
        `read_first=False`: as for `settled`, wait for a ring before the first read."""
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        read = read_first
        while True:
            rows = []
            if read:
                rows = await self._read(task_events_after, limit=EVENTS_PER_READ)
            read = True
            for seq, kind, state, data in rows:
                if seq <= self.seq:
                    continue  # the owner moved `seq` past these (it sent a snapshot)
                self.seq = seq
                item = StreamItem(
                    self.task_id,
                    seq,
                    ParseDict(data, StreamResponse()),
                    is_final(kind, state, self.ends_at),
                )
                yield item
                if item.final:
                    return
            now = loop.time()
            if rows:
                quiet_since = now
                if len(rows) >= EVENTS_PER_READ or not self._bell.listening:
                    continue  # more may be there; without a doorbell no ring would say so
                # The waiter joined the hub before the first read: the ring of an event
                # written since waits in its queue, so waiting now misses nothing.
            if deadline is not None and now >= deadline:
                return
            if drain.over():
                self.drained = True
                return
            pause = self._bell.interval
            if deadline is not None:
                pause = min(pause, deadline - now)
            if idle is not None:
                if now - quiet_since >= idle:
                    yield None
                    quiet_since = now
                pause = min(pause, idle - (now - quiet_since))
            await self._ring(pause)
