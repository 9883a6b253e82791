"""/metrics scraped from real daphne (and from the gRPC sidecar's own port) while the official
SDK client and raw SSE clients talk to it: send latency, tasks by state, open SSE streams."""

from __future__ import annotations

import asyncio
import json
import re
import uuid

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, TaskState
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from tasks_app.models import STATE_CHOICES, Task

from ..conftest import _free_port, start_grpc, stop_process
from .clients import V1_0, sdk_client, user_message
from .helpers import poll

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(url: str, **headers: str) -> Samples:
    response = httpx.get(f"{url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    return parse(response.text)


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, frozenset(labels.items())]


def sends(samples: Samples, method: str, dialect: str, outcome: str = "ok") -> float:
    return value(
        samples, "a2a_send_latency_seconds_count", method=method, dialect=dialect, outcome=outcome
    )


def test_a_jsonrpc_send_is_timed_and_its_task_counted_in_its_final_state(
    live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key = make_key(tenant)
    before = scrape(live_platform.url)

    async def scenario():
        async with sdk_client(live_platform.agent_url(agent), key=key, version=V1_0) as client:
            request = SendMessageRequest(message=user_message("hi", str(uuid.uuid4())))
            return [r async for r in client.send_message(request)]

    (response,) = asyncio.run(scenario())
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    after = scrape(live_platform.url)

    # exactly this one call, as a v1.0 SendMessage answered
    assert sends(after, "SendMessage", "1.0") == sends(before, "SendMessage", "1.0") + 1
    assert sends(after, "SendMessage", "1.0", "error") == sends(
        before, "SendMessage", "1.0", "error"
    )
    # and its task, completed (every other state of the agent at 0)
    tasks = {
        dict(labels)["state"]: count
        for (name, labels), count in after.items()
        if name == "a2a_tasks" and dict(labels)["tenant"] == tenant.slug
    }
    assert tasks == {state: 0.0 for state, _ in STATE_CHOICES} | {"TASK_STATE_COMPLETED": 1.0}
    assert value(after, "a2a_database_up") == 1 and value(after, "a2a_celery_broker_up") == 1
    for queue in ("agents", "push", "maintenance"):
        assert value(after, "a2a_celery_queue_depth", queue=queue) >= 0


def test_an_open_sse_stream_is_counted_until_its_client_leaves(
    live_platform, make_tenant, make_agent, make_key
):
    # given a slow echo agent: its task stays working for seconds after the stream opens
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 5})
    url, key = live_platform.agent_url(agent), make_key(tenant)
    assert poll(
        lambda: value(scrape(live_platform.url), "a2a_sse_streams_open") == 0, timeout=10
    ), "a stream of an earlier test is still counted as open"
    before = scrape(live_platform.url)
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/stream",  # v0.3: no A2A-Version header
        "params": {
            "message": {
                "kind": "message",
                "messageId": str(uuid.uuid4()),
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    }

    with httpx.Client(headers={"X-API-Key": key}, timeout=30) as http:
        with http.stream("POST", url, json=send) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            first = next(line for line in lines if line.startswith("data: "))
            task_id = json.loads(first[6:])["result"]["id"]
            # when the stream is open
            during = scrape(live_platform.url)
        # ... and once its client has gone (leaving the block closed the connection)
        closed = poll(
            lambda: value(scrape(live_platform.url), "a2a_sse_streams_open") == 0, timeout=3
        )
        still_running = Task.objects.get(pk=task_id).state

    assert value(during, "a2a_sse_streams_open") == 1
    assert sends(during, "SendStreamingMessage", "0.3") == (
        sends(before, "SendStreamingMessage", "0.3") + 1
    )
    assert closed, "the stream was still counted as open after its client left"
    # it went to 0 because the client left, not because the task ended the stream
    assert still_running == "TASK_STATE_WORKING"


def test_the_grpc_sidecar_serves_its_own_instruments_behind_the_token(
    live_platform, make_tenant, make_agent, make_key, tmp_path
):
    # given a sidecar with a metrics port and a token
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key = make_key(tenant)
    address, metrics = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    env = {
        **live_platform.env,
        "A2A_GRPC_METRICS_LISTEN": metrics,
        "A2A_METRICS_TOKEN": "sidecar-token",
    }
    sidecar = start_grpc(address, env, tmp_path / "grpc-metrics.log")
    try:
        web_before = scrape(live_platform.url)

        # when one message is sent over gRPC
        with grpc.insecure_channel(address) as channel:
            request = pb10.SendMessageRequest(
                tenant=f"{tenant.slug}/{agent.slug}",
                message=pb10.Message(
                    message_id=str(uuid.uuid4()),
                    role=pb10.Role.ROLE_USER,
                    parts=[pb10.Part(text="hi")],
                ),
            )
            answer = pb10_grpc.A2AServiceStub(channel).SendMessage(
                request, metadata=[("x-api-key", key)], timeout=30
            )
        assert answer.task.status.state == TaskState.TASK_STATE_COMPLETED

        # then the sidecar's port counts it, and only with the token
        refused = httpx.get(f"http://{metrics}/metrics", timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="metrics"'
        sidecar_samples = scrape(f"http://{metrics}", Authorization="Bearer sidecar-token")
    finally:
        stop_process(sidecar)
    assert sends(sidecar_samples, "SendMessage", "1.0") == 1
    assert value(sidecar_samples, "a2a_gc_frozen_objects") > STARTUP_OBJECTS
    assert not any(name.startswith("a2a_tasks") for name, _ in sidecar_samples)
    # daphne's /metrics does not see the sidecar's calls: they are another process's
    web_after = scrape(live_platform.url)
    assert sends(web_after, "SendMessage", "1.0") == sends(web_before, "SendMessage", "1.0")


# Fewer objects than any process of the platform loads at start-up (about 200,000 in daphne).
STARTUP_OBJECTS = 50_000


def test_every_process_freezes_the_objects_it_loaded_at_start_up(live_platform):
    # daphne reports its frozen objects on /metrics (the sidecar's are checked above)
    assert value(scrape(live_platform.url), "a2a_gc_frozen_objects") > STARTUP_OBJECTS

    # each Celery worker says so in its log once it is ready
    for name, role in (("worker", "agents"), ("push", "push"), ("maintenance", "maintenance")):
        log = live_platform.log_dir / f"{name}.log"
        line = re.compile(rf"{role} worker: (\d+) objects loaded at start-up frozen")
        found = poll(
            lambda line=line, log=log: line.search(log.read_text()) is not None, timeout=10
        )
        assert found, log.read_text()[-4000:]
        assert int(line.search(log.read_text()).group(1)) > STARTUP_OBJECTS
