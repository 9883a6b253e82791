"""With Redis as the channel layer, a worker's events ring the task's doorbell across processes,
and the batch answer keeps every call's result when one of them needs credentials."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from channels.layers import get_channel_layer

from tasks_app.doorbell import _group

from .clients import raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_worker_events_ring_the_doorbell(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 1})
    url, key = live_platform.agent_url(agent), make_key(tenant)
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"

    async def scenario() -> list[dict]:
        async with httpx.AsyncClient(headers={"X-API-Key": key, "A2A-Version": "1.0"}) as http:
            response = await http.post(
                url,
                json=raw_send("ring", return_immediately=True),
            )
        task_id = response.json()["result"]["task"]["id"]
        channel = await layer.new_channel()
        await layer.group_add(_group(task_id), channel)
        rings = []
        while not rings or rings[-1]["seq"] < 4:  # working, artifact, completed
            rings.append(await asyncio.wait_for(layer.receive(channel), 15))
        return rings

    rings = asyncio.run(scenario())
    assert all(r["type"] == "task.event" for r in rings)
    assert [r["seq"] for r in rings] == sorted(r["seq"] for r in rings)


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
