"""With Redis as the channel layer, a worker's events ring the task's doorbell across processes,
a waiter keeps a ring that arrives between two waits and lets its subscription go when done,
waiters are entries of their process's one subscription and are all gone after their calls,
and the batch answer keeps every call's result when one of them needs credentials."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from channels.layers import get_channel_layer

from tasks_app.doorbell import TASKS_GROUP, Doorbell, Subscription, hearing_every_ring

from .helpers import doorbell_waiters, raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_worker_events_ring_the_doorbell(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 1})
    url, key = live_platform.agent_url(agent), make_key(tenant)
    layer = get_channel_layer()
    assert type(layer).__name__ == "PubSubChannelLayer"

    async def scenario() -> list[dict]:
        async with httpx.AsyncClient(headers={"X-API-Key": key, "A2A-Version": "1.0"}) as http:
            response = await http.post(
                url,
                json=raw_send("ring", return_immediately=True),
            )
        task_id = response.json()["result"]["task"]["id"]
        channel = await layer.new_channel()
        await layer.group_add(TASKS_GROUP, channel)  # every task's rings
        rings = []
        while not rings or rings[-1]["seq"] < 4:  # working, artifact, completed
            ring = await asyncio.wait_for(layer.receive(channel), 15)
            if ring["task"] == uuid.UUID(task_id).hex:
                rings.append(ring)
        return rings

    rings = asyncio.run(scenario())
    assert all(r["type"] == "task.event" for r in rings)
    assert [r["seq"] for r in rings] == sorted(r["seq"] for r in rings)


# What each process keeps for its life: an event loop's anchor (a2a_platform.channel_layer) and
# the doorbell hub's channel and group (tasks_app.doorbell).
KEPT = (b"asgianchor.", b"asgidoorbell.", f"asgi__group__{TASKS_GROUP}".encode())


def _subscribed(pattern: str = "asgi*") -> set[bytes]:
    """The channels someone is subscribed to on the channel layer's Redis; by default not
    those a process keeps for its life (`KEPT`)."""
    import redis
    from django.conf import settings

    with redis.Redis.from_url(settings.REDIS_URL) as client:
        channels = set(client.pubsub_channels(pattern))
    if pattern != "asgi*":
        return channels
    return {c for c in channels if not c.startswith(KEPT)}


def test_a_subscription_keeps_a_ring_between_waits_and_lets_go_when_done():
    group = f"test.{uuid.uuid4().hex}"
    before, anchors = _subscribed(), _subscribed("asgianchor.*")

    async def scenario() -> tuple[dict | None, dict | None, set[bytes]]:
        layer = get_channel_layer()
        async with Subscription(group) as bell:
            assert bell.channel is not None
            quiet = await bell.wait(0.2)
            # Rung while nobody is in wait(): the next wait still gets it.
            await layer.group_send(group, {"type": "task.event", "seq": 7})
            await asyncio.sleep(0.2)
            rung = await bell.wait(5)
            during = _subscribed()
        # The event loop's anchor stays while the loop runs.
        assert len(_subscribed("asgianchor.*") - anchors) == 1
        return quiet, rung, during

    quiet, rung, during = asyncio.run(scenario())
    assert quiet is None
    assert rung == {"type": "task.event", "seq": 7}
    assert len(during - before) == 2  # its own channel and the group's
    assert _subscribed() - before == set()


def test_a_waiter_that_comes_after_a_ring_still_gets_it():
    task = uuid.uuid4()

    async def scenario() -> tuple[bool, bool, dict | None, dict | None]:
        layer = get_channel_layer()
        async with Doorbell(uuid.uuid4()):  # starts this loop's hub
            early = await hearing_every_ring()
            await asyncio.sleep(1.1)
            later = await hearing_every_ring()
        ring = {"type": "task.event", "task": task.hex, "seq": 3, "kind": "status_update"}
        await layer.group_send(TASKS_GROUP, ring)
        await asyncio.sleep(0.3)  # the hub hears it while nobody waits for the task
        async with Doorbell(task) as bell:
            kept = await bell.wait(5)
            nothing_more = await bell.wait(0.3)
        return early, later, kept, nothing_more

    early, later, kept, nothing_more = asyncio.run(scenario())
    # Only a hub that has listened a while is trusted to have heard everything since.
    assert (early, later) == (False, True)
    assert kept is not None and kept["seq"] == 3
    assert nothing_more is None


def test_blocking_sends_leave_no_subscription_behind(
    live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    url, key = live_platform.agent_url(agent), make_key(tenant)
    before = _subscribed()

    async def sends() -> list[str]:
        async with httpx.AsyncClient(headers={"X-API-Key": key, "A2A-Version": "1.0"}) as http:
            answers = await asyncio.gather(
                *(http.post(url, json=raw_send(f"hi {n}"), timeout=30) for n in range(20))
            )
        return [a.json()["result"]["task"]["status"]["state"] for a in answers]

    assert set(asyncio.run(sends())) == {"TASK_STATE_COMPLETED"}
    assert _subscribed() - before == set()
    # The waits were entries of daphne's one subscription to the tasks group, all gone now.
    assert f"asgi__group__{TASKS_GROUP}".encode() in _subscribed("asgi__group__*")
    assert doorbell_waiters(live_platform) == 0


def test_a_batch_keeps_every_answer_when_one_call_needs_a_key(
    live_platform, make_tenant, make_agent
):
    agent = make_agent(
        make_tenant(),
        "pub",
        kind="conformance",
        visibility="public",
        anonymous_scope="shared",
        config={"step_seconds": 0},
    )
    batch = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": f"tck-complete-task-{uuid.uuid4()}",
                    "role": "ROLE_USER",
                    "parts": [{"text": "hi"}],
                }
            },
        },
        {"jsonrpc": "2.0", "id": 2, "method": "GetExtendedAgentCard", "params": {}},
    ]
    response = httpx.post(
        live_platform.agent_url(agent), json=batch, headers={"A2A-Version": "1.0"}, timeout=30
    )
    assert response.status_code == 200
    first, second = response.json()
    assert first["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert second["error"]["code"] == -32050 and "API key" in second["error"]["message"]
