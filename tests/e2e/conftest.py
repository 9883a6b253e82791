"""Fixtures shared by the end-to-end tests: an HTTP client, agents under test (helpers.py), and
one cluster of many processes behind HAProxy for the modules that need it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from faults.cluster import Cluster, haproxy_bin, running_cluster
from faults.suite import SETTINGS, heal

from ..conftest import require
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


class SharedCluster:
    """One cluster (faults/cluster.py: PostgreSQL and Redis of its own, two web processes, two
    agents workers, push and maintenance workers, beat, two gRPC sidecars, HAProxy in front,
    with the fault suite's settings) for the fault suite's bounded part and the topology test:
    starting one costs half a minute of the suite. Started at first use, healed for each later
    user (`heal`: a member that exited without being told to is started again), stopped by
    `close()` or at the session's end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._stack: ExitStack | None = None
        self._cluster: Cluster | None = None

    def get(self) -> Cluster:
        if self._cluster is None:
            require(
                haproxy_bin().exists(),
                f"HAProxy ({haproxy_bin()}) is missing: apt-get install haproxy",
            )
            self._stack = ExitStack()
            self._cluster = self._stack.enter_context(
                running_cluster(self.run_dir, settings=SETTINGS, grpc=2)
            )
        else:
            heal(self._cluster)
        return self._cluster

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack = self._cluster = None


@pytest.fixture(scope="session")
def shared_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedCluster]:
    shared = SharedCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield shared
    finally:
        shared.close()
