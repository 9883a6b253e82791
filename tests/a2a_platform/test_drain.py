"""a2a_platform.drain: a wait inside `watch()` goes on while the process serves and through the
drain's grace, and ends (TimeoutError) when the grace does; what else it waits with is left
alone. End to end (daphne, the sidecar) in tests/e2e/test_drain.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from a2a_platform import drain


@pytest.fixture(autouse=True)
def serving() -> Iterator[None]:
    drain.reset()
    yield
    drain.reset()


async def wait_forever() -> None:
    async with drain.watch():
        await asyncio.get_running_loop().create_future()


def test_a_wait_goes_on_through_the_grace_and_ends_with_it():
    async def scenario() -> None:
        waiting = asyncio.ensure_future(wait_forever())
        await asyncio.sleep(0)
        assert not drain.draining()
        drain.begin(3600)  # a grace that does not end by itself during the test
        assert drain.draining() and not drain.over()
        await asyncio.sleep(0.05)
        assert not waiting.done()
        drain.end()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiting, 30)
        assert drain.over() and not drain._waits

    asyncio.run(scenario())


def test_the_grace_ends_by_itself():
    async def scenario() -> None:
        waiting = asyncio.ensure_future(wait_forever())
        await asyncio.sleep(0)
        drain.begin(0.01)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waiting, 30)  # an upper bound only
        assert drain.over()

    asyncio.run(scenario())


def test_a_wait_begun_after_the_grace_ends_at_once():
    async def scenario() -> None:
        drain.begin(0)
        await asyncio.sleep(0.01)
        assert drain.over()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(wait_forever(), 30)

    asyncio.run(scenario())


def test_a_second_signal_does_not_move_the_end():
    async def scenario() -> None:
        drain.begin(3600)
        drain.begin(0)  # ignored: the first grace holds
        await asyncio.sleep(0.05)
        assert drain.draining() and not drain.over()

    asyncio.run(scenario())


def test_what_the_wait_itself_waits_with_is_untouched():
    async def scenario() -> tuple[bool, bool]:
        # Its own timeout still ends it (the doorbell's wait has one), and leaves no entry.
        async with drain.watch():
            try:
                async with asyncio.timeout(0.01):
                    await asyncio.get_running_loop().create_future()
            except TimeoutError:
                own_timeout = True
        # A wait that simply returns is not cut, and leaves no entry either.
        async with drain.watch():
            await asyncio.sleep(0)
        return own_timeout, not drain._waits

    assert asyncio.run(scenario()) == (True, True)
