"""A serving process's drain: what its requests in flight do once it has been told to stop.

The web processes (a2a_platform.webserver) and the gRPC sidecar (grpc_server.server) call
`begin(grace)` on SIGTERM. From then on `draining()` is true: readiness answers 503, and HTTP
answers close their connections. For `grace` seconds what is in flight goes on as before: a
blocking send whose task settles meanwhile gets the settled task, a stream its events. Then
`over()` is true, and every wait inside `watch()` ends at once: a blocking send is answered with
its task as it is (the client keeps the id), a stream ends with a hint to resume on another
process (its events are in the log). Nothing is lost: the runs go on on the workers.

This is the process's own life, not the platform's state (which is in PostgreSQL): one per
process, touched only on its event loop. Until `begin`, the waits pay a flag read and a set
entry each, no timer.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

_draining = False
_over = False
# The deadlines of the waits in progress (`watch`), moved to "now" when the grace ends.
_waits: set[asyncio.Timeout] = set()


def draining() -> bool:
    """True from SIGTERM on: take no new work (readiness 503, connections closed after their
    answer)."""
    return _draining


def over() -> bool:
    """True once the drain's grace has passed: waits end now."""
    return _over


def begin(grace: float) -> None:
    """Start draining on the running event loop; the waits end `grace` seconds from now. A
    second call (a second signal) changes nothing."""
    global _draining
    if _draining:
        return
    _draining = True
    asyncio.get_running_loop().call_later(max(grace, 0.0), end)


def end() -> None:
    """End the grace now: every wait inside `watch()` returns."""
    global _over, _draining
    _draining = _over = True
    now = asyncio.get_running_loop().time()
    for timeout in list(_waits):
        timeout.reschedule(now)


def reset() -> None:
    """Back to serving (tests of this module, run in one process)."""
    global _draining, _over
    _draining = _over = False
    _waits.clear()


class watch:  # noqa: N801 (used like asyncio.timeout)
    """`async with watch():` the await inside ends with TimeoutError when the drain's grace
    ends (at once if it has ended). What the event followers wait on the doorbell with."""

    __slots__ = ("_timeout",)

    async def __aenter__(self) -> None:
        self._timeout = asyncio.timeout(0 if _over else None)
        await self._timeout.__aenter__()
        _waits.add(self._timeout)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        _waits.discard(self._timeout)
        return await self._timeout.__aexit__(exc_type, exc, traceback)
