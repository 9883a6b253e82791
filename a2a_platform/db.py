"""ORM calls from async code: one bounded thread pool per process.

`database_sync_to_async` inside a request runs on that request's ThreadSensitiveContext, and
asgiref makes a fresh single-thread executor for every context: a thread started and torn down
per request. Here every ORM hop of the async paths (the HTTP and gRPC operations, the worker's
agent runs) goes to one process-wide pool of `A2A_DB_THREADS` threads, sized with the database
pool so a thread never waits for a connection. Each call returns its connection to the pool
(closes it on SQLite) when it ends, exactly as `database_sync_to_async` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from channels.db import DatabaseSyncToAsync
from django.conf import settings

P = ParamSpec("P")
R = TypeVar("R")

_executor: ThreadPoolExecutor | None = None


def executor() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(
            max_workers=settings.A2A_DB_THREADS, thread_name_prefix="a2a-db"
        )
    return _executor


def db(func: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """`await db(func)(...)`: run a sync ORM function on the process's database threads."""

    @functools.wraps(func)
    async def call(*args: P.args, **kwargs: P.kwargs) -> R:
        runner = DatabaseSyncToAsync(func, thread_sensitive=False, executor=executor())
        return await runner(*args, **kwargs)

    return call
