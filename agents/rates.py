"""Request rates: whether one more A2A call fits its tenant's and its API key's rates.

The admission point every binding shares (bindings.callers) asks `admit` once per call, after
the caller is authenticated and before the operation runs, so a refused call writes nothing.

What is counted (agents.plans): `requests_per_second` R allows at most 60*R calls in any
minute, `request_burst` B at most B calls in any one second, both for all of a tenant's agents;
`key_requests_per_second` and `key_request_burst` the same for one API key (a key's own values
win over its tenant's). 0 is unlimited, and a call with no rate to count touches nothing here:
no Redis round trip. Anonymous calls (public agents) count against the tenant's rates only.

The counting is the `limits` library's moving window (docs/decisions.md says why), in Redis
(`REDIS_URL`) so that every web process and the gRPC sidecar share it, or in this process's
memory on the embedded profile (one web process). When Redis does not answer, the same limits
are counted in this process's memory until it does again (`Counter`; docs/limits.md, "When
Redis is away").
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

import redis
from django.conf import settings
from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError
from prometheus_client import Counter as PrometheusCounter
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from a2a_platform import metrics

from . import usage
from .errors import LimitExceeded
from .models import Tenant
from .plans import KEY, TENANT, Limits

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A Redis that does not answer within this many seconds is taken for away: it answers a
# counter in well under a millisecond, and a call waits for it at most this long.
REDIS_TIMEOUT_SECONDS = 0.5
# While Redis is away, it is asked again at most this often (per process), so a dead Redis
# costs one timeout every few seconds, not one per call.
REDIS_RETRY_SECONDS = 5.0
# Keys in Redis start with this.
KEY_PREFIX = "a2a-rates"
# The errors that mean Redis is away (a refused or dropped connection, a timeout, a Redis that
# is loading or read-only); the library passes its client's errors through.
REDIS_ERRORS = (redis.RedisError, StorageError, OSError, asyncio.TimeoutError)

FALLBACK = PrometheusCounter(
    "a2a_rate_limit_fallback_total",
    "Request-rate checks this process counted in its own memory because Redis did not answer "
    "(docs/limits.md, 'When Redis is away').",
    registry=None,
)
metrics.WEB_REGISTRY.register(FALLBACK)
metrics.SIDECAR_REGISTRY.register(FALLBACK)

# Replaced by tests to move time on (the wait before Redis is asked again).
clock: Callable[[], float] = time.monotonic


# --- which rates a call counts against ------------------------------------------------------


@dataclass(frozen=True)
class Rate:
    """One rate a call counts against: the limit (agents.plans.LIMITS), its value, whose it is,
    and the library's item for it (the window and how many calls fit in it)."""

    limit: str
    value: int
    scope: str
    item: RateLimitItem
    # Who is counted: ("tenant", "<id>") or ("key", "<id>").
    who: tuple[str, str]

    @property
    def window(self) -> float:
        return float(self.item.get_expiry())


@lru_cache(maxsize=1024)
def _per_second(amount: int) -> RateLimitItem:
    return RateLimitItemPerSecond(amount)


@lru_cache(maxsize=1024)
def _per_minute(amount: int) -> RateLimitItem:
    return RateLimitItemPerMinute(amount)


def rates_of(limits: Limits, *, tenant_id: int, key_id: int | None) -> list[Rate]:
    """The rates a call counts against, in the order they are counted: the key's before the
    tenant's, and in each the one-second burst before the minute. A call refused by one is not
    counted by those after it, but has been by those before it: so a key over its own rate
    never uses up its tenant's, and calls refused by the minute's rate do not keep a
    well-behaved client's one-second burst from filling again."""
    rates = []
    if key_id is not None:
        key = (KEY, str(key_id))
        if limits.key_request_burst:
            burst = limits.key_request_burst
            rates.append(Rate("key_request_burst", burst, KEY, _per_second(burst), key))
        if limits.key_requests_per_second:
            rate = limits.key_requests_per_second
            rates.append(Rate("key_requests_per_second", rate, KEY, _per_minute(60 * rate), key))
    tenant = (TENANT, str(tenant_id))
    if limits.request_burst:
        burst = limits.request_burst
        rates.append(Rate("request_burst", burst, TENANT, _per_second(burst), tenant))
    if limits.requests_per_second:
        rate = limits.requests_per_second
        rates.append(Rate("requests_per_second", rate, TENANT, _per_minute(60 * rate), tenant))
    return rates


# --- admission ------------------------------------------------------------------------------


async def admit(
    *, limits: Limits, tenant: Tenant, key_id: int | None, agent_id: int | None = None
) -> None:
    """Count one call of `tenant` (with the API key `key_id`, None for an anonymous call)
    against its rates; LimitExceeded (kind RATE) if one of them has no room for it."""
    if not (
        limits.requests_per_second
        or limits.request_burst
        or (key_id is not None and (limits.key_requests_per_second or limits.key_request_burst))
    ):
        return  # the common case: nothing to count, no round trip
    counter = counter_for_loop()
    for rate in rates_of(limits, tenant_id=tenant.pk, key_id=key_id):
        if not await counter.hit(rate):
            retry_after = await counter.retry_after(rate)
            _refused(tenant_id=tenant.pk, agent_id=agent_id, limit=rate.limit)
            raise LimitExceeded(
                refusal_message(rate, tenant.slug, retry_after),
                kind=LimitExceeded.RATE,
                limit=rate.limit,
                value=rate.value,
                scope=rate.scope,
                retry_after=retry_after,
                window=rate.window,
            )


def _refused(*, tenant_id: int, agent_id: int | None, limit: str) -> None:
    """Count a call refused for its rate in the tenant's usage (agents.usage)."""
    if agent_id is not None:
        usage.count(tenant_id=tenant_id, agent_id=agent_id, refused_rate=1)


def refusal_message(rate: Rate, tenant_slug: str, retry_after: float) -> str:
    whose = f"Tenant {tenant_slug}" if rate.scope == TENANT else "This API key"
    what = (
        f"burst of {rate.value} request{'s' if rate.value != 1 else ''} in one second"
        if rate.limit.endswith("burst")
        else f"rate of {rate.value} request{'s' if rate.value != 1 else ''} per second"
    )
    return f"{whose} is over its {what}; retry in {seconds_text(retry_after)} s."


def seconds_text(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


# --- counting: Redis, or this process's memory ----------------------------------------------


class Counter:
    """The moving-window counters of one event loop: in Redis when `redis_url` is set, else in
    memory. A Redis that fails a check (refused, dropped, timed out) is left for
    `retry_seconds`: meanwhile every check is counted in this process's memory with the same
    limits, a warning is logged once, and `a2a_rate_limit_fallback_total` counts the checks.
    The first check after the wait asks Redis again; if it answers, counting goes back there."""

    def __init__(
        self,
        redis_url: str = "",
        *,
        timeout: float = REDIS_TIMEOUT_SECONDS,
        retry_seconds: float = REDIS_RETRY_SECONDS,
    ) -> None:
        self.redis: MovingWindowRateLimiter | None = None
        if redis_url:
            storage = RedisStorage(
                f"async+{redis_url}",
                implementation="redispy",
                key_prefix=KEY_PREFIX,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # Once, at once: a pooled connection Redis closed (a restart, an idle timeout)
                # is replaced; redis-py's default retries with a backoff would make a call wait
                # for a dead Redis for seconds.
                retry=Retry(NoBackoff(), 1),  # type: ignore[arg-type]
            )
            self.redis = MovingWindowRateLimiter(storage)
        self.memory = MovingWindowRateLimiter(MemoryStorage())
        self.retry_seconds = retry_seconds
        # While Redis is away: when it was found away, and when to ask it again.
        self.away_since: float | None = None
        self.ask_again_at = 0.0

    @property
    def counting_in_redis(self) -> bool:
        return self.redis is not None and self.away_since is None

    async def hit(self, rate: Rate) -> bool:
        """Count one call against `rate`; False (and not counted) when it has no room."""
        return await self._counted(lambda limiter: limiter.hit(rate.item, *rate.who))

    async def retry_after(self, rate: Rate) -> float:
        """Seconds until `rate`'s window lets one more call through: when the oldest call in a
        full window leaves it, rounded up to the millisecond past it."""
        stats = await self._counted(lambda limiter: limiter.get_window_stats(rate.item, *rate.who))
        wait = stats.reset_time - time.time()  # the library's clock: the epoch
        return max(math.ceil(wait * 1000 + 1) / 1000, 0.001)

    async def _counted(self, check: Callable[[MovingWindowRateLimiter], Awaitable[T]]) -> T:
        if self.redis is not None and (self.away_since is None or clock() >= self.ask_again_at):
            try:
                result = await check(self.redis)
            except REDIS_ERRORS as exc:
                self._redis_away(exc)
            else:
                if self.away_since is not None:
                    self._redis_back()
                return result
        if self.redis is not None:
            FALLBACK.inc()
        return await check(self.memory)

    def _redis_away(self, exc: BaseException) -> None:
        now = clock()
        self.ask_again_at = now + self.retry_seconds
        if self.away_since is None:
            self.away_since = now
            logger.warning(
                "Redis did not answer the request-rate counters (%s: %s): counting request "
                "rates in this process's memory, with the same limits, until it does; asking "
                "it again every %g s.",
                type(exc).__name__,
                exc,
                self.retry_seconds,
            )

    def _redis_back(self) -> None:
        assert self.away_since is not None
        logger.warning(
            "Redis answers the request-rate counters again after %.1f s: counting there again.",
            clock() - self.away_since,
        )
        self.away_since = None


# One Counter per event loop: redis-py's asyncio connections and the memory store's locks
# belong to the loop they were made in. A process serves A2A calls on one loop (daphne's, the
# sidecar's), so in practice this is one Counter per process.
_counters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Counter] = (
    weakref.WeakKeyDictionary()
)


def counter_for_loop() -> Counter:
    loop = asyncio.get_running_loop()
    counter = _counters.get(loop)
    if counter is None:
        counter = _counters[loop] = Counter(settings.REDIS_URL)
    return counter


def forget_counters() -> None:
    """Make the next call build its counters anew, from the settings (tests)."""
    _counters.clear()
