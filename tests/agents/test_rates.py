"""Request rates (agents.rates): which rates a call counts against, the refusal, counting in
Redis and in memory, no round trip for a tenant without rates, and a Redis that goes away."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import redis

from agents import rates
from agents.errors import LimitExceeded
from agents.models import Tenant
from agents.plans import Limits

from ..conftest import _free_port, require

# Tenant and key ids of these tests: far from any a database hands out, and new in each test,
# as the suite's Redis outlives a test.
_IDS = itertools.count(10**12 + os.getpid() * 10**5)


def tenant(slug: str = "acme") -> Tenant:
    return Tenant(pk=next(_IDS), slug=slug)


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    rates.forget_counters()
    yield
    rates.forget_counters()


@pytest.fixture
def redis_url(settings) -> str:
    require(bool(settings.REDIS_URL), "Redis (REDIS_URL; `make test` starts one)")
    return settings.REDIS_URL


@dataclass
class PrivateRedis:
    """A redis-server of this test's own, which it may stop and start again on its port."""

    port: int
    log: str
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                *("--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--logfile", self.log),
            ]
        )
        client = redis.Redis(port=self.port, socket_timeout=1)
        for _ in range(100):
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.1)
        raise RuntimeError(f"redis-server on {self.port} did not answer")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5)


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    require(shutil.which("redis-server") is not None, "redis-server (`make test` installs it)")
    server = PrivateRedis(_free_port(), str(tmp_path / "redis.log"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def admit_until_refused(
    limits: Limits, tenant_: Tenant, key_id: int | None = None, most: int = 200
) -> tuple[int, LimitExceeded]:
    """Calls admitted before the first refusal, and the refusal."""
    for admitted in range(most):
        try:
            await rates.admit(limits=limits, tenant=tenant_, key_id=key_id)
        except LimitExceeded as exc:
            return admitted, exc
    raise AssertionError(f"{most} calls were admitted")


# --- which rates ----------------------------------------------------------------------------


def test_a_call_counts_against_its_keys_rates_before_its_tenants_burst_before_minute():
    limits = Limits(
        requests_per_second=5, request_burst=10, key_requests_per_second=2, key_request_burst=3
    )
    counted = rates.rates_of(limits, tenant_id=7, key_id=9)
    assert [(r.limit, r.value, r.scope, r.who, r.item.amount, r.window) for r in counted] == [
        ("key_request_burst", 3, "key", ("key", "9"), 3, 1.0),
        ("key_requests_per_second", 2, "key", ("key", "9"), 120, 60.0),
        ("request_burst", 10, "tenant", ("tenant", "7"), 10, 1.0),
        ("requests_per_second", 5, "tenant", ("tenant", "7"), 300, 60.0),
    ]


def test_an_anonymous_call_counts_against_its_tenants_rates_only():
    limits = Limits(requests_per_second=5, key_requests_per_second=2, key_request_burst=3)
    assert [r.limit for r in rates.rates_of(limits, tenant_id=7, key_id=None)] == [
        "requests_per_second"
    ]
    assert rates.rates_of(Limits(key_request_burst=3), tenant_id=7, key_id=None) == []


def test_the_refusal_names_the_limit_and_the_wait():
    sustained, burst = rates.rates_of(
        Limits(requests_per_second=5, key_request_burst=1), tenant_id=1, key_id=2
    )[::-1]
    assert (
        rates.refusal_message(sustained, "acme", 0.4)
        == "Tenant acme is over its rate of 5 requests per second; retry in 0.4 s."
    )
    assert (
        rates.refusal_message(burst, "acme", 0.012)
        == "This API key is over its burst of 1 request in one second; retry in 0.012 s."
    )


# --- counting -------------------------------------------------------------------------------


def test_a_tenant_gets_sixty_times_its_rate_in_a_minute_then_a_refusal_with_the_wait(redis_url):
    acme = tenant()

    async def scenario():
        admitted, refusal = await admit_until_refused(Limits(requests_per_second=2), acme)
        return admitted, refusal, rates.counter_for_loop().counting_in_redis

    admitted, refusal, in_redis = asyncio.run(scenario())
    assert in_redis
    assert admitted == 120
    assert refusal.reason == "RATE_LIMITED" and refusal.jsonrpc_code == -32054
    assert (refusal.limit, refusal.value, refusal.scope, refusal.window) == (
        "requests_per_second",
        2,
        "tenant",
        60.0,
    )
    # The first call of the minute leaves the window some time before 60 s from now.
    assert 0 < refusal.retry_after <= 60.001
    assert refusal.message.startswith("Tenant acme is over its rate of 2 requests per second")
    keys = redis.Redis.from_url(redis_url).keys(f"{rates.KEY_PREFIX}:*tenant/{acme.pk}/*")
    assert len(keys) == 1, keys


def test_a_keys_own_rate_refuses_it_and_leaves_the_tenants_room_to_other_keys(redis_url):
    acme = tenant()
    limits = Limits(requests_per_second=100, key_requests_per_second=1)

    async def scenario():
        admitted, refusal = await admit_until_refused(limits, acme, key_id=next(_IDS))
        # Another key of the tenant (and an anonymous caller) still gets in.
        await rates.admit(limits=limits, tenant=acme, key_id=next(_IDS))
        await rates.admit(limits=limits, tenant=acme, key_id=None)
        return admitted, refusal

    admitted, refusal = asyncio.run(scenario())
    assert admitted == 60
    assert (refusal.limit, refusal.scope) == ("key_requests_per_second", "key")
    assert refusal.message.startswith("This API key is over its rate of 1 request per second")


def test_a_burst_refusal_waits_at_most_its_second(redis_url):
    async def scenario():
        # Calls a few microseconds apart: the burst's second is full after 3, unless the
        # machine stalls for a second in between, in which case counting goes on.
        return await admit_until_refused(Limits(request_burst=3), tenant())

    admitted, refusal = asyncio.run(scenario())
    assert admitted >= 3
    assert (refusal.limit, refusal.window) == ("request_burst", 1.0)
    assert 0 < refusal.retry_after <= 1.001
    assert refusal.headers()["Retry-After"] == "1"
    assert refusal.headers()["RateLimit-Policy"] == '"request_burst";q=3;w=1'


def test_the_embedded_profile_counts_in_memory(settings):
    settings.REDIS_URL = ""

    async def scenario():
        admitted, refusal = await admit_until_refused(Limits(requests_per_second=1), tenant())
        counter = rates.counter_for_loop()
        return admitted, refusal, counter.redis

    admitted, refusal, redis_limiter = asyncio.run(scenario())
    assert redis_limiter is None
    assert admitted == 60 and refusal.limit == "requests_per_second"


def test_a_tenant_without_rates_costs_no_redis_round_trip(settings, private_redis):
    settings.REDIS_URL = private_redis.url
    watch = private_redis.client()

    def commands() -> int:
        # Each INFO is itself one command: two in a row differ by exactly 1.
        return int(watch.info("stats")["total_commands_processed"])

    async def calls(limits: Limits, n: int) -> None:
        for _ in range(n):
            await rates.admit(limits=limits, tenant=tenant(), key_id=next(_IDS))

    before = commands()
    # Unlimited, or only a key's rate for an anonymous caller... and keys with none set.
    asyncio.run(calls(Limits(), 50))
    asyncio.run(calls(Limits(running_runs=3, queued_runs=10, stored_tasks=100), 50))
    after = commands()
    assert after - before == 1
    # The same counter does go to this Redis for a tenant that has a rate.
    asyncio.run(calls(Limits(request_burst=1000), 1))
    assert commands() - after > 1


def test_while_redis_is_away_calls_are_counted_in_memory_then_in_redis_again(
    settings, private_redis, caplog, monkeypatch
):
    settings.REDIS_URL = private_redis.url
    now = [1000.0]
    monkeypatch.setattr(rates, "clock", lambda: now[0])
    acme = tenant()
    limits = Limits(requests_per_second=1)
    fallbacks = rates.FALLBACK._value.get()

    async def scenario():
        counter = rates.counter_for_loop()
        for _ in range(10):
            await rates.admit(limits=limits, tenant=acme, key_id=None)
        assert counter.counting_in_redis
        private_redis.stop()
        # Away: every call is still counted, in memory, with the same limit (which does not
        # know the 10 Redis counted: 60 more in the minute, then refusals).
        admitted, refusal = await admit_until_refused(limits, acme)
        assert not counter.counting_in_redis
        assert (admitted, refusal.limit, refusal.scope) == (60, "requests_per_second", "tenant")
        # Redis is back; it is asked again once REDIS_RETRY_SECONDS have passed, not before.
        private_redis.start()
        with pytest.raises(LimitExceeded):
            await rates.admit(limits=limits, tenant=acme, key_id=None)
        assert not counter.counting_in_redis
        now[0] += rates.REDIS_RETRY_SECONDS
        await rates.admit(limits=limits, tenant=acme, key_id=None)
        assert counter.counting_in_redis

    with caplog.at_level(logging.WARNING, logger="agents.rates"):
        asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if r.name == "agents.rates"]
    assert len(said) == 2, said  # once when it went away, once when it came back
    assert said[0].startswith("Redis did not answer the request-rate counters")
    assert "counting request rates in this process's memory" in said[0]
    assert said[1].startswith("Redis answers the request-rate counters again")
    # Every check while it was away: 61 hits and a wait until the first refusal, then the
    # refused call before Redis was asked again (a hit and a wait).
    assert rates.FALLBACK._value.get() - fallbacks == 64
    # The new Redis (it keeps nothing across a restart) holds the call counted after it.
    keys = private_redis.client().keys(f"{rates.KEY_PREFIX}:*tenant/{acme.pk}/*")
    assert len(keys) == 1
    assert private_redis.client().llen(keys[0]) == 1


def test_a_dead_redis_costs_one_try_per_wait_not_one_per_call(settings, monkeypatch):
    # A port nothing listens on: each try fails at once; the tries are what is counted.
    settings.REDIS_URL = f"redis://127.0.0.1:{_free_port()}/0"
    tries = []

    async def scenario():
        counter = rates.counter_for_loop()
        real = counter.redis.hit

        async def counted(*args, **kwargs):
            tries.append(1)
            return await real(*args, **kwargs)

        monkeypatch.setattr(counter.redis, "hit", counted)
        for _ in range(20):
            await rates.admit(limits=Limits(request_burst=1000), tenant=tenant(), key_id=None)

    asyncio.run(scenario())
    assert len(tries) == 1
