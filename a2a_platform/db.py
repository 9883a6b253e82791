"""ORM calls from async code: one bounded thread pool per process.

`database_sync_to_async` inside a request runs on that request's ThreadSensitiveContext, and
asgiref makes a fresh single-thread executor for every context: a thread started and torn down
per request. Here every ORM hop of the async paths (the HTTP and gRPC operations, the worker's
agent runs) goes to one process-wide pool of `A2A_DB_THREADS` threads, sized with the database
pool so a thread never waits for a connection. Each call returns its connection to the pool
(closes it on SQLite) when it ends, exactly as `database_sync_to_async` does.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

import psycopg
from asgiref.sync import SyncToAsync
from django.conf import settings
from django.db import close_old_connections

P = ParamSpec("P")
R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None
_threads: int | None = None
# One more thread for the calls that must not queue behind the others: an agent worker's
# heartbeat, which renews its runs' leases however much event writing is waiting.
_own_lane: ThreadPoolExecutor | None = None


# How long a run's own writes and a follower's reads wait for a database that went away (a
# restart, a failover) before they give up with its error (tasks_app.runtime, tasks_app.streams).
DATABASE_WAIT_SECONDS = 60.0


def database_lost(exc: BaseException | None) -> bool:
    """Whether `exc`, or an error it was raised from, says the database connection was lost
    rather than that a statement was wrong: PostgreSQL gone or restarting (SQLSTATE classes
    08 and 57P, or no SQLSTATE: the client's own "connection is closed", a pool with no
    connection to give). A statement that times out or deadlocks is not a lost database.

    Only the explicit causes are followed (`raise ... from`, as Django's wrapper raises its own
    class from psycopg's): an error raised while another was being handled is its own."""
    for _ in range(5):  # Django's wrapper, maybe an executor's: the cause is near
        if exc is None:
            return False
        if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
            state = getattr(exc, "sqlstate", None) or ""
            if not state or state.startswith(("08", "57P")):
                return True
        exc = exc.__cause__
    return False


def use_threads(threads: int) -> None:
    """Size the pool for this process (before its first call): an agent worker uses
    `A2A_WORKER_DB_THREADS` instead of `A2A_DB_THREADS`."""
    global _threads
    if _executor is not None:
        raise RuntimeError("The database threads are already running.")
    _threads = threads


def _size() -> int:
    return _threads or settings.A2A_DB_THREADS


def executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(max_workers=_size(), thread_name_prefix="a2a-db")
    return _executor


def _lane() -> ThreadPoolExecutor:
    global _own_lane
    if _own_lane is None:
        _own_lane = ThreadPoolExecutor(max_workers=1, thread_name_prefix="a2a-db-lane")
    return _own_lane


_local = threading.local()


def caller_loop() -> asyncio.AbstractEventLoop | None:
    """On a database thread, the event loop whose call it is running; elsewhere None."""
    return getattr(_local, "loop", None)


# Whose work a call is (a tenant, as the caller builder and the worker's runtime set it): when
# the database threads are all busy, calls wait for one in a queue per owner, served in turn.
fair_key: contextvars.ContextVar[object] = contextvars.ContextVar("db_fair_key", default=None)


class FairGate:
    """At most `slots` calls on the database threads at once; the calls past that wait in one
    first-in-first-out queue per owner (`fair_key`), and each freed thread goes to the next
    owner in turn, not to the longest queue. So a tenant whose requests or runs keep every
    thread busy delays another tenant's call by one call, not by its whole backlog. Free
    threads are taken at once, without waiting (the uncontended path is a counter). One gate
    per event loop; touched only on it."""

    def __init__(self, slots: int) -> None:
        self.free = slots
        self.waiting: dict[object, collections.deque[asyncio.Future[None]]] = {}

    async def acquire(self) -> None:
        if self.free > 0 and not self.waiting:
            self.free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(fair_key.get(), collections.deque()).append(future)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # handed a thread as it was cancelled: pass it on
            else:
                self._forget(future)
            raise

    def release(self) -> None:
        while self.waiting:
            owner, queue = next(iter(self.waiting.items()))
            del self.waiting[owner]
            future = queue.popleft()
            if queue:
                self.waiting[owner] = queue  # to the back of the turn
            if not future.done():
                future.set_result(None)
                return
        self.free += 1

    def _forget(self, future: asyncio.Future[None]) -> None:
        for owner, queue in list(self.waiting.items()):
            if future in queue:
                queue.remove(future)
                if not queue:
                    del self.waiting[owner]
                return


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, FairGate] = weakref.WeakKeyDictionary()


def _gate(loop: asyncio.AbstractEventLoop) -> FairGate:
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = FairGate(_size())
    return gate


def db(func: Callable[P, R], *, own_lane: bool = False) -> Callable[P, Coroutine[Any, Any, R]]:
    """`await db(func)(...)`: run a sync ORM function on the process's database threads,
    taking turns by owner (`fair_key`, FairGate) when they are all busy (`own_lane`: on a
    thread of its own, never queued behind them)."""

    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        if own_lane:
            return await loop.run_in_executor(
                _lane(), context.run, _in_db_thread, loop, func, args, kwargs
            )
        gate = _gate(loop)
        await gate.acquire()
        try:
            return await loop.run_in_executor(
                executor(), context.run, _in_db_thread, loop, func, args, kwargs
            )
        finally:
            gate.release()

    return call


def _in_db_thread(
    loop: asyncio.AbstractEventLoop, func: Callable[..., R], args: Any, kwargs: Any
) -> R:
    """What channels' `database_sync_to_async` does around a call, without building an asgiref
    SyncToAsync per call (a tenth of a GetTask's CPU): connections are tidied before and after,
    and `async_to_sync` inside the call runs on the caller's event loop, as it does under
    SyncToAsync, through the thread-local asgiref reads for that. Two things SyncToAsync also
    does are not done, and nothing here needs them: values of asgiref `Local`s set by the
    caller (Django's script prefix, active language or time zone) are not carried to the
    thread, and context variables the call sets do not flow back to the caller."""
    SyncToAsync.threadlocal.main_event_loop = loop
    SyncToAsync.threadlocal.main_event_loop_pid = os.getpid()
    _local.loop = loop
    close_old_connections()
    try:
        return func(*args, **kwargs)
    finally:
        close_old_connections()
