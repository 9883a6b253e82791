"""a2a_platform.db: ORM calls from async code on the process's database threads, and the lane
of its own that an agent worker's heartbeat uses so it never waits behind them."""

from __future__ import annotations

import asyncio
import threading

from a2a_platform.db import FairGate, caller_loop, db, executor, fair_key


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


def test_a_lost_database_is_told_from_a_statement_that_failed():
    """`database_lost` on PostgreSQL's own errors: a session ended by the server (as a restart
    ends them all) is lost, and so is the client's closed connection, however Django wraps
    them; a statement that timed out or was wrong is not."""
    import os

    import django.db
    import psycopg
    import pytest

    from a2a_platform.db import database_lost

    url = os.environ["DATABASE_URL"]

    def error_of(conn: psycopg.Connection, sql: str) -> psycopg.Error:
        with pytest.raises(psycopg.Error) as caught:
            conn.execute(sql)
        return caught.value

    def wrapped(error: psycopg.Error) -> django.db.Error:
        """As Django's DatabaseErrorWrapper raises it: its own class, from psycopg's."""
        try:
            raise getattr(django.db, type(error).__mro__[1].__name__)(*error.args) from error
        except django.db.Error as exc:
            return exc

    with psycopg.connect(url, autocommit=True) as killer, psycopg.connect(url) as victim:
        pid = victim.info.backend_pid
        killer.execute("SELECT pg_terminate_backend(%s)", [pid])
        ended = error_of(victim, "SELECT 1")
        assert ended.sqlstate == "57P01"  # terminating connection due to administrator command
        closed = error_of(victim, "SELECT 1")  # the client knows now
        assert closed.sqlstate is None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET statement_timeout = 10")
            timed_out = error_of(conn, "SELECT pg_sleep(1)")
            wrong = error_of(conn, "SELECT nothing FROM nowhere")
    for error in (ended, closed):
        assert database_lost(error) and database_lost(wrapped(error))
    assert isinstance(timed_out, psycopg.OperationalError)  # as the lost ones are
    try:  # a bug of its own, raised while a lost database's error was being handled
        try:
            raise ended
        except psycopg.Error:
            raise KeyError("status") from None
    except KeyError as exc:
        bug = exc
    for error in (timed_out, wrong, ValueError("no"), bug):
        assert not database_lost(error)
    assert not database_lost(None)


def test_busy_database_threads_are_handed_out_by_owner_in_turn_not_by_arrival():
    """One tenant's backlog of calls, queued first, does not keep another's call waiting behind
    all of it: when a thread frees, the owners waiting take turns."""
    gate = FairGate(1)

    async def turns():
        await gate.acquire()  # the one thread, taken
        handed: list[str] = []

        async def wait(owner: str, label: str) -> None:
            fair_key.set(owner)
            await gate.acquire()
            handed.append(label)
            gate.release()

        waiters = [asyncio.ensure_future(wait("noisy", f"n{i}")) for i in range(3)]
        waiters.append(asyncio.ensure_future(wait("quiet", "q")))
        await asyncio.sleep(0)
        gate.release()
        await asyncio.gather(*waiters)
        return handed, gate.free

    assert asyncio.run(turns()) == (["n0", "q", "n1", "n2"], 1)


def test_a_call_canceled_while_it_waits_for_a_thread_gives_up_its_place():
    gate = FairGate(1)

    async def scenario():
        await gate.acquire()
        waiting = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        gate.release()
        return gate.free, gate.waiting

    assert asyncio.run(scenario()) == (1, {})
