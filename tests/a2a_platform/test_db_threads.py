"""a2a_platform.db: ORM calls from async code on the process's database threads, and the lane
of its own that an agent worker's heartbeat uses so it never waits behind them."""

from __future__ import annotations

import asyncio
import threading

from a2a_platform.db import caller_loop, db, executor


def test_a_call_runs_on_a_database_thread_and_knows_its_callers_loop():
    async def scenario():
        where = await db(lambda: (threading.current_thread().name, caller_loop()))()
        return where, asyncio.get_running_loop()

    (name, loop_seen), loop = asyncio.run(scenario())
    assert name.startswith("a2a-db_")
    assert loop_seen is loop
    assert caller_loop() is None  # not on a database thread


def test_an_own_lane_call_does_not_queue_behind_busy_database_threads():
    release = threading.Event()

    async def scenario():
        threads = executor()._max_workers
        busy = [asyncio.ensure_future(db(release.wait)(30)) for _ in range(threads + 2)]
        await asyncio.sleep(0.1)  # every database thread is now waiting
        try:
            # Deadlock guard, not a speed check: queued behind the busy threads this call
            # would wait until `release`, which only comes after it.
            return await asyncio.wait_for(
                db(lambda: threading.current_thread().name, own_lane=True)(), 10
            )
        finally:
            release.set()
            await asyncio.gather(*busy)

    assert asyncio.run(scenario()).startswith("a2a-db-lane")
