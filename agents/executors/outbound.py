"""What the kinds that call out (`openai`, `a2a-proxy`, `webhook`) share: the SSRF guard at
save time and at connect time (a2a_platform.ssrf, the agents' policy), and the outcome of
"test connection".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeVar

import httpx

from a2a_platform.ssrf import AGENT, UnsafeUrl, guarded_async_client, url_check

E = TypeVar("E", bound=BaseException)


class ConnectionTestFailed(Exception):
    """ "Test connection" did not get through; the message says what happened, in one line fit
    to show the tenant (never a secret)."""


def url_problem(url: str, field: str) -> str:
    """Why the guard refuses `url` ('' when it does not), naming the config field. Blocking:
    it resolves the host."""
    try:
        url_check(url, policy=AGENT, what=field)
    except UnsafeUrl as exc:
        return exc.reason
    return ""


def http_client(*, timeout: float, **kwargs: Any) -> httpx.AsyncClient:
    """An httpx client whose every connection passes the guard: `timeout` for connecting and
    for each read (a stream that goes quiet that long ends), no redirects, no proxy from the
    environment."""
    return guarded_async_client(policy=AGENT, timeout=httpx.Timeout(timeout), **kwargs)


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, and so on: clients wrap what a transport raises (the guard's
    refusal inside an httpx or SDK error, say)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def in_chain(exc: BaseException, kind: type[E]) -> E | None:
    """The first error of `kind` in `exc`'s chain (error_chain), or None."""
    return next((e for e in error_chain(exc) if isinstance(e, kind)), None)
