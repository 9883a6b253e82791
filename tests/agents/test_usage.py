"""Usage metering (agents.usage) on real PostgreSQL: the in-process buffer and how counts merge
in it, the flush that adds them to the day rows (from two threads at once too), what a failed
flush keeps, the flush thread and the flush when a process exits, counting inside a run, the
reads, and the a2a_usage_* metrics."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from datetime import date, timedelta
from typing import Any

import pytest
from django.db import DataError, connection
from prometheus_client.parser import text_string_to_metric_families

from agents import usage
from agents.models import UsageDay

from ..conftest import ROOT
from ..e2e.helpers import wait_until

DAY = date(2026, 3, 14)


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "metered")


def row_of(agent: Any, day: date = DAY) -> dict[str, Any]:
    return UsageDay.objects.values(*usage.COUNTERS).get(agent=agent, day=day)


# --- the buffer -----------------------------------------------------------------------------


def test_counts_merge_per_tenant_agent_and_day():
    meter = usage.Meter(background=False)
    meter.count(1, 10, {"requests": 1}, DAY)
    meter.count(1, 10, {"requests": 2, "run_seconds": 0.25}, DAY)
    meter.count(1, 10, {"runs": 1}, DAY + timedelta(days=1))
    meter.count(1, 11, {"tokens_in": 7, "tokens_out": 3}, DAY)
    assert meter.pending() == {
        (1, 10, DAY): {"requests": 3, "run_seconds": 0.25},
        (1, 10, DAY + timedelta(days=1)): {"runs": 1},
        (1, 11, DAY): {"tokens_in": 7, "tokens_out": 3},
    }


def test_a_count_goes_to_todays_utc_day():
    meter = usage.Meter(background=False)
    meter.count(1, 10, {"requests": 1})
    [(_, _, day)] = meter.pending()
    assert day == usage.today()


@pytest.mark.parametrize(
    ("counters", "error"),
    [({"request": 1}, TypeError), ({"stored_bytes": 1}, TypeError), ({"runs": -1}, ValueError)],
)
def test_only_known_counters_and_growth_are_counted(counters, error):
    meter = usage.Meter(background=False)
    with pytest.raises(error):
        meter.count(1, 10, counters, DAY)
    assert meter.pending() == {}


# --- the flush -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_flush_adds_to_the_day_row_and_empties_the_buffer(agent):
    meter = usage.Meter(background=False)
    meter.count(agent.tenant_id, agent.pk, {"requests": 2, "run_seconds": 1.5}, DAY)
    assert meter.flush()
    assert meter.pending() == {}
    meter.count(agent.tenant_id, agent.pk, {"requests": 1, "runs": 1, "run_seconds": 0.5}, DAY)
    meter.count(agent.tenant_id, agent.pk, {"push_deliveries": 4, "refused_quota": 1}, DAY)
    assert meter.flush()
    assert row_of(agent) == {
        "requests": 3,
        "runs": 1,
        "run_seconds": 2.0,
        "tokens_in": 0,
        "tokens_out": 0,
        "push_deliveries": 4,
        "refused_rate": 0,
        "refused_quota": 1,
        "refused_concurrency": 0,
    }
    assert UsageDay.objects.filter(agent=agent).count() == 1


@pytest.mark.django_db
def test_a_batch_larger_than_one_statement_is_added_whole(agent, monkeypatch):
    monkeypatch.setattr(usage, "ROWS_PER_STATEMENT", 3)
    meter = usage.Meter(background=False)
    for i in range(8):
        meter.count(agent.tenant_id, agent.pk, {"runs": i + 1}, DAY + timedelta(days=i))
    assert meter.flush()
    runs = dict(UsageDay.objects.filter(agent=agent).values_list("day", "runs"))
    assert runs == {DAY + timedelta(days=i): i + 1 for i in range(8)}


@pytest.mark.django_db
def test_the_counts_of_a_deleted_agent_are_dropped_and_the_others_written(agent, make_agent):
    gone = make_agent(agent.tenant, "gone")
    meter = usage.Meter(background=False)
    meter.count(agent.tenant_id, agent.pk, {"runs": 1}, DAY)
    meter.count(gone.tenant_id, gone.pk, {"runs": 1}, DAY)
    # A count naming an agent of another tenant (no such pair) is dropped as well.
    meter.count(agent.tenant_id + 1000, agent.pk, {"runs": 5}, DAY)
    gone.delete()
    assert meter.flush()
    assert meter.pending() == {}
    assert list(UsageDay.objects.filter(tenant=agent.tenant).values_list("agent_id", "runs")) == [
        (agent.pk, 1)
    ]


@pytest.mark.django_db
def test_a_flush_that_fails_keeps_its_counts_for_the_next(agent):
    """The table not there yet (the new code running before its migration, in a rolling
    upgrade): the counts wait in the buffer, merged with those counted meanwhile."""
    meter = usage.Meter(background=False)
    meter.count(agent.tenant_id, agent.pk, {"requests": 2}, DAY)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE agents_usageday RENAME TO agents_usageday_away")
    assert not meter.flush()
    meter.count(agent.tenant_id, agent.pk, {"requests": 1, "runs": 1}, DAY)
    assert meter.pending() == {(agent.tenant_id, agent.pk, DAY): {"requests": 3, "runs": 1}}
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE agents_usageday_away RENAME TO agents_usageday")
    assert meter.flush()
    assert (row_of(agent)["requests"], row_of(agent)["runs"]) == (3, 1)


@pytest.mark.django_db
def test_a_count_no_column_can_hold_is_dropped_not_kept_forever(agent):
    meter = usage.Meter(background=False)
    meter.count(agent.tenant_id, agent.pk, {"tokens_in": 2**63}, DAY)
    with pytest.raises(DataError):  # what the flush met
        usage.usage_add(meter.pending())
    assert not meter.flush()
    assert meter.pending() == {}
    meter.count(agent.tenant_id, agent.pk, {"tokens_in": 5}, DAY)
    assert meter.flush()
    assert row_of(agent)["tokens_in"] == 5


@pytest.mark.django_db(transaction=True)
def test_two_threads_adding_to_the_same_row_at_once_lose_nothing(agent):
    """Two processes flushing the same agent's day at the same moment, the first insert
    included: each adds to what the other wrote."""
    rounds = 40
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def flusher() -> None:
        meter = usage.Meter(background=False)
        try:
            start.wait()
            for _ in range(rounds):
                meter.count(agent.tenant_id, agent.pk, {"requests": 1, "run_seconds": 0.5}, DAY)
                meter.count(agent.tenant_id, agent.pk, {"runs": 1}, DAY + timedelta(days=1))
                assert meter.flush()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=flusher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert row_of(agent)["requests"] == 2 * rounds
    assert row_of(agent)["run_seconds"] == 2 * rounds * 0.5
    assert row_of(agent, DAY + timedelta(days=1))["runs"] == 2 * rounds


@pytest.mark.django_db(transaction=True)
def test_the_thread_flushes_when_asked_and_every_interval(agent, settings):
    settings.A2A_USAGE_FLUSH_SECONDS = 3600
    asked = usage.Meter()
    asked.count(agent.tenant_id, agent.pk, {"requests": 1}, DAY)
    asked.flush_soon()  # the interval is an hour: only this flushes now
    wait_until(lambda: UsageDay.objects.filter(agent=agent).exists(), what="the flush asked for")
    settings.A2A_USAGE_FLUSH_SECONDS = 0.05
    timed = usage.Meter()
    timed.count(agent.tenant_id, agent.pk, {"requests": 1}, DAY)
    wait_until(lambda: row_of(agent)["requests"] == 2, what="the interval's flush")


@pytest.mark.django_db(transaction=True)
def test_a_process_flushes_what_it_counted_when_it_exits(agent, settings):
    """Counted in a process that exits before its first interval ends: the exit's flush
    writes them (as a web process's after its drain, a worker's after its runs)."""
    db = connection.settings_dict
    code = (
        "import django; django.setup()\n"
        "from agents import usage\n"
        f"usage.count(tenant_id={agent.tenant_id}, agent_id={agent.pk}, requests=3, runs=2)\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "a2a_platform.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "A2A_USAGE_FLUSH_SECONDS": "3600",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=90
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    counted = row_of(agent, usage.today())
    assert (counted["requests"], counted["runs"]) == (3, 2)


# --- inside a run ---------------------------------------------------------------------------


def test_a_run_counts_itself_and_what_its_executor_counts():
    meter = usage.Meter(background=False)

    async def executor() -> bool:
        return usage.run_count(tokens_in=12, tokens_out=5)

    async def job() -> bool:
        metered = usage.run_metered(tenant_id=1, agent_id=10, meter=meter)
        try:
            # as tasks_app.execution starts the executor: a task of its own, same context
            return await asyncio.ensure_future(executor())
        finally:
            metered.end()

    assert asyncio.run(job())
    [(key, counts)] = meter.pending().items()
    assert key[:2] == (1, 10)
    assert {k: v for k, v in counts.items() if k != "run_seconds"} == {
        "runs": 1,
        "tokens_in": 12,
        "tokens_out": 5,
    }
    assert counts["run_seconds"] > 0
    assert not usage.run_count(tokens_in=1)  # outside a run: nothing to count to


# --- reads ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_reads_are_the_tenants_own_in_the_range(agent, make_agent, make_tenant):
    other_agent = make_agent(agent.tenant, "another")
    stranger = make_agent(make_tenant(), "stranger")
    meter = usage.Meter(background=False)
    for day, runs in ((DAY - timedelta(days=1), 1), (DAY, 2), (DAY + timedelta(days=1), 4)):
        meter.count(agent.tenant_id, agent.pk, {"runs": runs}, day)
    meter.count(agent.tenant_id, other_agent.pk, {"runs": 8, "requests": 1}, DAY)
    meter.count(stranger.tenant_id, stranger.pk, {"runs": 16}, DAY)
    assert meter.flush()

    rows = usage.usage_read(tenant_id=agent.tenant_id, since=DAY, until=DAY + timedelta(days=1))
    assert [(r["day"], r["agent"], r["runs"]) for r in rows] == [
        (DAY, "another", 8),
        (DAY, "metered", 2),
        (DAY + timedelta(days=1), "metered", 4),
    ]
    assert rows[0]["requests"] == 1 and rows[0]["agent_id"] == other_agent.pk
    only = usage.usage_read(tenant_id=agent.tenant_id, since=DAY, until=DAY, agent_id=agent.pk)
    assert [(r["agent"], r["runs"]) for r in only] == [("metered", 2)]
    assert usage.runs_counted(tenant_id=agent.tenant_id, since=DAY) == 14
    assert usage.runs_counted(tenant_id=agent.tenant_id, since=DAY + timedelta(days=2)) == 0

    series = usage.usage_by_day(rows, since=DAY - timedelta(days=1), until=DAY + timedelta(days=2))
    assert series.days[0] == DAY - timedelta(days=1) and len(series.days) == 4
    assert series.values["runs"] == [0, 10, 4, 0]  # the day before `since` was not read
    assert usage.usage_by_agent(rows)[agent.pk]["runs"] == 6


# --- Prometheus -----------------------------------------------------------------------------


def scrape(client) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.django_db
def test_the_metrics_are_todays_totals_by_tenant_only_when_asked(
    client, settings, agent, make_agent, make_tenant
):
    settings.A2A_METRICS_OPEN = True
    before = scrape(client)
    other = make_agent(make_tenant(), "other")
    meter = usage.Meter(background=False)
    meter.count(agent.tenant_id, agent.pk, {"requests": 3, "runs": 2, "run_seconds": 1.5})
    meter.count(agent.tenant_id, agent.pk, {"tokens_in": 40, "tokens_out": 9})
    meter.count(agent.tenant_id, agent.pk, {"push_deliveries": 2, "refused_rate": 1})
    meter.count(other.tenant_id, other.pk, {"requests": 1, "refused_concurrency": 2})
    meter.count(agent.tenant_id, agent.pk, {"requests": 100}, usage.today() - timedelta(days=1))
    assert meter.flush()

    after = scrape(client)
    added = {
        ("a2a_usage_requests_total", ()): 4,
        ("a2a_usage_runs_total", ()): 2,
        ("a2a_usage_run_seconds_total", ()): 1.5,
        ("a2a_usage_tokens_total", (("direction", "in"),)): 40,
        ("a2a_usage_tokens_total", (("direction", "out"),)): 9,
        ("a2a_usage_push_deliveries_total", ()): 2,
        ("a2a_usage_refused_total", (("reason", "rate"),)): 1,
        ("a2a_usage_refused_total", (("reason", "quota"),)): 0,
        ("a2a_usage_refused_total", (("reason", "concurrency"),)): 2,
    }
    for (name, labels), n in added.items():
        key = (name, frozenset(labels))
        assert after[key] - before[key] == n, name
    assert not [k for k in after if k[0].startswith("a2a_usage") and dict(k[1]).get("tenant")]

    settings.A2A_METRICS_TENANT_LABEL = True
    by_tenant = scrape(client)
    mine = frozenset({("tenant", agent.tenant.slug)})
    assert by_tenant[("a2a_usage_requests_total", mine)] == 3
    assert by_tenant[("a2a_usage_tokens_total", mine | {("direction", "in")})] == 40
    assert by_tenant[("a2a_usage_refused_total", mine | {("reason", "rate")})] == 1
    theirs = frozenset({("tenant", other.tenant.slug)})
    assert by_tenant[("a2a_usage_refused_total", theirs | {("reason", "concurrency")})] == 2
