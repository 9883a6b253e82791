"""The fault suite's bounded part (`make faults` runs 20 trials of each, docs/reliability.md):
one trial of each fault on the suite's cluster (tests/e2e/conftest.py, `SharedCluster`: two web
processes, two agents workers, push and maintenance workers, beat, two sidecars, HAProxy in
front, throwaway PostgreSQL and Redis), and not one task stuck, one event lost or one event
duplicated (faults/suite.py says how each is counted)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from faults.cluster import Cluster
from faults.suite import AGENTS, FAULTS, notes, receiver_for, run_fault

from .conftest import SharedCluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

TRIALS = 1


@pytest.fixture(scope="module")
def cluster(shared_cluster: SharedCluster) -> Iterator[tuple[Cluster, Any, Any]]:
    running = shared_cluster.get()  # the topology test's too: it runs after, and stops it
    made = running.seed(AGENTS)
    receiver = receiver_for(running.run_dir)
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
