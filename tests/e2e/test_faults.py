"""The fault suite's bounded part (`make faults` runs 20 trials of each, docs/reliability.md):
one trial of each fault, on a cluster of its own (two web processes, two agents workers, push
and maintenance workers, beat, a sidecar, HAProxy in front, throwaway PostgreSQL and Redis),
and not one task stuck, one event lost or one event duplicated (faults/suite.py says how each
is counted)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from faults.cluster import Cluster, haproxy_bin, running_cluster
from faults.suite import AGENTS, FAULTS, SETTINGS, notes, receiver_for, run_fault

from ..conftest import require

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TRIALS = 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Any, Any]]:
    require(
        haproxy_bin().exists(), f"HAProxy ({haproxy_bin()}) is missing: apt-get install haproxy"
    )
    run_dir = tmp_path_factory.mktemp("faults")
    with running_cluster(run_dir, settings=SETTINGS, grpc=1) as running:
        made = running.seed(AGENTS)
        receiver = receiver_for(run_dir)
        try:
            yield running, made, receiver
        finally:
            receiver.stop()


@pytest.mark.parametrize("fault", [pytest.param(f, id=f.name) for f in FAULTS])
def test_nothing_is_stuck_lost_or_duplicated(cluster, fault):
    running, made, receiver = cluster
    outcome = asyncio.run(run_fault(fault, running, made, receiver, trials=TRIALS, log=print))
    counts = outcome.counts
    assert outcome.trials == TRIALS and counts.tasks >= 4 * TRIALS
    assert (counts.stuck, counts.lost, counts.duplicated) == (0, 0, 0), notes([outcome])
