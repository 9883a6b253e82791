"""Refused credentials in the audit log: counted in memory (no I/O, bounded keys, safe from
async code), added to one row per (tenant, agent, reason, hour) with a count, the first and last
time and a few addresses, by the process's thread and at exit; failed console logins too."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

import audit
from audit.failures import FAILURES, MAX_KEYS, SOURCES_KEPT, FailureBuffer, Failures
from audit.models import AUTH_FAILURE, AuditEvent

from ..conftest import ROOT
from ..e2e.helpers import wait_until

HOUR = datetime(2026, 3, 14, 9, tzinfo=UTC)


def failures_of(**filters) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=AUTH_FAILURE, **filters).order_by("pk"))


def refuse(buffer: FailureBuffer, tenant_id, agent_id, reason, source, at=HOUR) -> None:
    """A refusal at `at` (the buffer's own clock is now: tests name their hour)."""
    buffer.add(
        (tenant_id, agent_id, reason, at.replace(minute=0, second=0, microsecond=0)),
        Failures(1, at, at, [source] if source else []),
    )


@pytest.mark.django_db
def test_a_thousand_refusals_become_a_handful_of_rows(make_tenant, make_agent):
    tenant = make_tenant()
    first, second = make_agent(tenant, "first"), make_agent(tenant, "second")
    buffer = FailureBuffer(background=False, max_keys=MAX_KEYS)
    # given 1,000 refusals: two agents, two reasons, 50 addresses, over two hours
    for n in range(1000):
        agent = (first, second)[n % 2]
        reason = ("unknown API key", "revoked API key")[n // 2 % 2]
        at = HOUR + timedelta(minutes=n * 90 / 1000)
        refuse(buffer, tenant.pk, agent.pk, reason, f"192.0.2.{n % 50}", at)
    assert len(buffer.pending()) == 8
    # when the buffer is written
    assert buffer.flush()
    # then one row per agent, reason and hour, counting them all
    rows = failures_of(tenant_id=tenant.pk)
    assert len(rows) == 8
    assert sum(r.count for r in rows) == 1000
    first_hour = HOUR + timedelta(hours=1)
    [one] = [
        r
        for r in rows
        if r.object_id == str(first.pk) and r.reason == "unknown API key" and r.at < first_hour
    ]
    assert (one.object_type, one.object_label, one.actor) == (
        "agent",
        f"{tenant.slug}/first",
        "unauthenticated",
    )
    assert one.at >= HOUR and one.last_at < HOUR + timedelta(hours=1) and one.at <= one.last_at
    assert len(one.sources) == SOURCES_KEPT and one.source == one.sources[0]
    assert buffer.pending() == {}


@pytest.mark.django_db
def test_later_writes_add_to_the_hours_row(make_tenant):
    tenant = make_tenant()
    buffer = FailureBuffer(background=False)
    refuse(buffer, tenant.pk, None, "unknown API key", "192.0.2.1", HOUR + timedelta(minutes=5))
    assert buffer.flush()
    refuse(buffer, tenant.pk, None, "unknown API key", "192.0.2.2", HOUR + timedelta(minutes=1))
    refuse(buffer, tenant.pk, None, "unknown API key", None, HOUR + timedelta(minutes=50))
    assert buffer.flush()
    [row] = failures_of(tenant_id=tenant.pk)
    assert row.count == 3 and row.object_type == "tenant" and row.object_label == tenant.slug
    assert row.at == HOUR + timedelta(minutes=1) and row.last_at == HOUR + timedelta(minutes=50)
    assert row.sources == ["192.0.2.1", "192.0.2.2"]


@pytest.mark.django_db(transaction=True)
def test_two_processes_writing_the_same_hour_lose_nothing(make_tenant):
    tenant = make_tenant()
    rounds = 30
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(address: str) -> None:
        buffer = FailureBuffer(background=False)
        try:
            start.wait()
            for _ in range(rounds):
                refuse(buffer, tenant.pk, None, "unknown API key", address)
                assert buffer.flush()
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(f"192.0.2.{n}",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    [row] = failures_of(tenant_id=tenant.pk)
    assert row.count == 2 * rounds and sorted(row.sources) == ["192.0.2.1", "192.0.2.2"]


def test_the_buffer_is_bounded_and_counts_what_it_dropped(caplog):
    buffer = FailureBuffer(background=False, max_keys=3)
    for n in range(5):
        refuse(buffer, 1, n, "unknown API key", None)
    refuse(buffer, 1, 0, "unknown API key", None)  # a key it holds still counts
    assert len(buffer.pending()) == 3 and buffer.dropped == 2
    assert buffer.pending()[(1, 0, "unknown API key", HOUR)].count == 2
    buffer.forget()
    assert buffer.pending() == {} and buffer.dropped == 0


@pytest.mark.django_db
def test_a_dropped_count_is_logged_at_the_next_write(caplog, make_tenant):
    tenant = make_tenant()
    buffer = FailureBuffer(background=False, max_keys=1)
    refuse(buffer, tenant.pk, None, "unknown API key", None)
    refuse(buffer, tenant.pk, None, "another reason", None)
    assert buffer.flush()
    assert "1 additions were dropped" in caplog.text
    assert len(failures_of(tenant_id=tenant.pk)) == 1


def test_auth_failure_is_cheap_and_safe_from_async_code():
    """What the protocol edge calls: from many coroutines and threads at once, in memory."""
    FAILURES.forget()

    async def calls() -> None:
        await asyncio.gather(
            *(
                asyncio.to_thread(
                    lambda: audit.auth_failure(
                        tenant_id=7, agent_id=8, reason="unknown API key", source="192.0.2.9"
                    )
                )
                for _ in range(50)
            )
        )
        for _ in range(50):
            audit.auth_failure(tenant_id=7, agent_id=None, reason="x" * 500, source=None)

    try:
        asyncio.run(calls())
        pending = FAILURES.pending()
        counts = {key[:3]: entry.count for key, entry in pending.items()}
        assert counts == {(7, 8, "unknown API key"): 50, (7, None, "x" * 200): 50}
    finally:
        FAILURES.forget()  # nothing of this reaches the database


@pytest.mark.django_db(transaction=True)
def test_the_thread_writes_every_interval(make_tenant, settings):
    settings.A2A_AUDIT_FLUSH_SECONDS = 0.05
    tenant = make_tenant()
    buffer = FailureBuffer()
    buffer.refused(tenant.pk, None, "unknown API key", "192.0.2.3")
    wait_until(lambda: failures_of(tenant_id=tenant.pk), what="the interval's write")
    [row] = failures_of(tenant_id=tenant.pk)
    assert row.count == 1 and row.source == "192.0.2.3"


@pytest.mark.django_db(transaction=True)
def test_a_process_writes_what_it_counted_when_it_exits(make_tenant):
    tenant = make_tenant()
    db = connection.settings_dict
    code = (
        "import django; django.setup()\n"
        "import audit\n"
        "for _ in range(3):\n"
        f"    audit.auth_failure(tenant_id={tenant.pk}, agent_id=None, reason='bad key',"
        " source='192.0.2.4')\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "a2a_platform.settings",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "A2A_AUDIT_FLUSH_SECONDS": "3600",
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, timeout=90
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    [row] = failures_of(tenant_id=tenant.pk)
    assert (row.count, row.reason, row.sources) == (3, "bad key", ["192.0.2.4"])


# The process's own buffer, whose thread may write at any moment: on committed data.
@pytest.mark.django_db(transaction=True)
def test_failed_logins_are_counted_naming_only_accounts_that_exist(client, django_user_model):
    FAILURES.forget()
    django_user_model.objects.create_user("alice", password="right-password-1")
    try:
        for username in ("alice", "alice", "S3cret-typed-as-a-name"):
            response = client.post(
                "/console/login/",
                {"username": username, "password": "wrong"},
                REMOTE_ADDR="192.0.2.77",
            )
            assert response.status_code == 200  # the form again, with its error
        assert FAILURES.flush()
    finally:
        FAILURES.forget()
    rows = failures_of(tenant_id=None)
    assert {(r.reason, r.count) for r in rows} == {
        ("login refused for alice", 2),
        ("login refused for a user name no account has", 1),
    }
    assert all(r.object_type == "login" and r.sources == ["192.0.2.77"] for r in rows)
    assert not AuditEvent.objects.filter(reason__contains="S3cret").exists()
