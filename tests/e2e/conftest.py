"""Fixtures shared by the end-to-end tests: an HTTP client, and agents under test (helpers.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from .helpers import Target


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client


@pytest.fixture
def make_target(live_platform, make_tenant, make_agent, make_key) -> Callable[..., Target]:
    """An agent (echo unless told) in a new tenant, or in `tenant`, with a key of its tenant
    named `key_name`; `headers` are the version headers its JSON-RPC calls send (v1.0's)."""

    def make(
        slug: str = "echo",
        *,
        kind: str = "echo",
        tenant: Any = None,
        config: dict[str, Any] | None = None,
        key_name: str = "alice",
        headers: dict[str, str] | None = None,
        **fields: Any,
    ) -> Target:
        tenant = tenant or make_tenant()
        agent = make_agent(tenant, slug, kind=kind, config=config, **fields)
        target = Target(live_platform.agent_url(agent), make_key(tenant, key_name), agent)
        if headers is not None:
            target.headers = headers
        return target

    return make
