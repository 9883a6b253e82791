"""The per-process cache of agents and API keys (agents.cache) behind every A2A call: what it
saves, what it never keeps, and the bound on how long a change takes to reach a process
(A2A_AUTH_CACHE_SECONDS). The clock is the cache's, moved by hand: nothing here is timed."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from agents import auth, cache
from agents.auth import caller_resolve
from agents.errors import AgentNotFound, AuthenticationRequired
from agents.models import Agent, ApiKey, Tenant
from agents.services import api_key_create

# caller_resolve reads on the process's database threads: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(cache, "clock", fake)
    return fake


@pytest.fixture
def reads(monkeypatch):
    """How often the cache went to the database, per kind of row."""
    counts: Counter[str] = Counter()

    def spy(kind, real):
        def read(*args, **kwargs):
            counts[kind] += 1
            return real(*args, **kwargs)

        return read

    monkeypatch.setattr(cache, "agent_get_active", spy("agent", cache.agent_get_active))
    monkeypatch.setattr(cache, "key_read", spy("key", cache.key_read))
    return counts


@pytest.fixture
def keyed_agent(make_tenant, make_agent):
    """An echo agent, a key of its tenant (for principal team-a) and that key's secret."""
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key, secret = api_key_create(tenant=tenant, name="ci", principal="team-a")
    return agent, key, secret


def resolve(agent: Agent, raw_key: str | None):
    return async_to_sync(caller_resolve)(
        tenant_slug=agent.tenant.slug, agent_slug=agent.slug, raw_key=raw_key
    )


def test_a_second_call_reads_nothing(keyed_agent, clock, reads):
    agent, key, secret = keyed_agent
    first_agent, first = resolve(agent, secret)
    again_agent, again = resolve(agent, secret)
    assert reads == {"agent": 1, "key": 1}
    assert first == again and again.owner == "key:team-a" and again.api_key_id == key.pk
    assert again_agent.pk == first_agent.pk == agent.pk


def test_calls_that_miss_together_read_once(keyed_agent, clock, reads, settings):
    """When the entries expire under load, the requests in flight share one read; a caller
    that goes away does not take the read from the others; an error is shared too."""
    agent, key, secret = keyed_agent

    async def together(raw_key: str | None, *, cancel_first: bool = False) -> list:
        calls = [
            asyncio.ensure_future(
                caller_resolve(
                    tenant_slug=agent.tenant.slug, agent_slug=agent.slug, raw_key=raw_key
                )
            )
            for _ in range(16)
        ]
        if cancel_first:
            await asyncio.sleep(0)  # every call has missed the cache and joined the read
            calls[0].cancel()
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = async_to_sync(together)(secret, cancel_first=True)
    assert reads == {"agent": 1, "key": 1}
    assert isinstance(answers[0], asyncio.CancelledError)
    assert {principal.api_key_id for _, principal in answers[1:]} == {key.pk}
    assert not auth._reading  # nothing left behind
    # an error is shared as well
    Agent.objects.filter(pk=agent.pk).update(is_active=False)
    clock.now += settings.A2A_AUTH_CACHE_SECONDS + 1
    answers = async_to_sync(together)(secret)
    assert all(isinstance(a, AgentNotFound) for a in answers), answers
    assert reads["agent"] == 2 and not auth._reading
    # with the cache off, no call joins another's read
    settings.A2A_AUTH_CACHE_SECONDS = 0
    Agent.objects.filter(pk=agent.pk).update(is_active=True)
    async_to_sync(together)(secret)
    assert reads["agent"] == 2 + 16


def test_the_secret_is_compared_on_every_call(keyed_agent, clock, reads):
    agent, _, secret = keyed_agent
    resolve(agent, secret)
    for wrong in (secret[:-1] + ("x" if secret[-1] != "x" else "y"), secret + "x"):
        with pytest.raises(AuthenticationRequired):
            resolve(agent, wrong)  # same prefix: the cached row, a different digest
    assert reads == {"agent": 1, "key": 1}


def test_no_raw_key_is_kept(keyed_agent, clock):
    agent, _, secret = keyed_agent
    resolve(agent, secret)
    kept = repr(cache._keys._entries) + repr(cache._agents._entries)
    random_part = secret.split("_", 2)[2]  # a2a_<prefix>_<random>; the random part has "_" too
    assert secret not in kept and random_part not in kept


def test_a_revoked_key_works_no_longer_than_the_bound(keyed_agent, clock, reads, settings):
    # given a key this process has read
    agent, key, secret = keyed_agent
    resolve(agent, secret)
    # when it is revoked (by any process, any code path: here a queryset update)
    ApiKey.objects.filter(pk=key.pk).update(revoked_at=timezone.now())
    # then this process may still take it until the bound, counted from its read, and not after
    clock.now += settings.A2A_AUTH_CACHE_SECONDS - 0.001
    resolve(agent, secret)
    clock.now += 0.002
    with pytest.raises(AuthenticationRequired):
        resolve(agent, secret)
    assert reads["key"] == 2


@pytest.mark.parametrize("what", ["agent", "tenant"])
def test_a_deactivated_agent_or_tenant_is_gone_after_the_bound(keyed_agent, clock, settings, what):
    agent, _, secret = keyed_agent
    resolve(agent, secret)
    if what == "agent":
        Agent.objects.filter(pk=agent.pk).update(is_active=False)
    else:
        tenant = Tenant.objects.get(pk=agent.tenant_id)
        tenant.is_active = False
        tenant.save()
    clock.now += settings.A2A_AUTH_CACHE_SECONDS
    with pytest.raises(AgentNotFound):
        resolve(agent, secret)


def test_a_changed_agent_is_read_again_after_the_bound(keyed_agent, clock, settings):
    agent, _, secret = keyed_agent
    resolve(agent, secret)
    Agent.objects.filter(pk=agent.pk).update(visibility=Agent.Visibility.PUBLIC)
    with pytest.raises(AuthenticationRequired):
        resolve(agent, None)  # private, as this process read it
    clock.now += settings.A2A_AUTH_CACHE_SECONDS
    assert resolve(agent, None)[1].is_anonymous


def test_what_is_not_found_is_not_cached(keyed_agent, clock, reads):
    agent, _, secret = keyed_agent
    ghost = Agent(tenant=agent.tenant, slug="ghost")
    for _ in range(2):
        with pytest.raises(AgentNotFound):
            resolve(ghost, secret)
        with pytest.raises(AuthenticationRequired):
            resolve(agent, "a2a_deadbeef_" + secret.rpartition("_")[2])
    assert reads == {"agent": 3, "key": 2}  # ghost twice, echo once; the unknown key twice
    # ... and a key made after a miss works at once.
    _, fresh = api_key_create(tenant=agent.tenant, name="fresh")
    assert resolve(agent, fresh)[1].owner == "key:fresh"


def test_the_cache_can_be_turned_off(keyed_agent, clock, reads, settings):
    settings.A2A_AUTH_CACHE_SECONDS = 0
    agent, _, secret = keyed_agent
    resolve(agent, secret)
    resolve(agent, secret)
    assert reads == {"agent": 2, "key": 2}


def test_last_used_at_is_written_at_most_once_a_minute(keyed_agent, clock, settings, monkeypatch):
    agent, key, secret = keyed_agent
    start = timezone.now()
    now = [start]
    monkeypatch.setattr(timezone, "now", lambda: now[0])

    def last_used():
        return ApiKey.objects.get(pk=key.pk).last_used_at

    resolve(agent, secret)
    assert last_used() == start
    for seconds in (30, 59):
        now[0] = start + timedelta(seconds=seconds)
        clock.now += settings.A2A_AUTH_CACHE_SECONDS  # the row is read again, too
        resolve(agent, secret)
        assert last_used() == start
    now[0] = start + timedelta(seconds=61)
    resolve(agent, secret)
    resolve(agent, secret)
    assert last_used() == start + timedelta(seconds=61)
