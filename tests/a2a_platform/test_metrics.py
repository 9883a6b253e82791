"""/metrics on real PostgreSQL and real brokers: exact task and push counts, queue depths and a
broker that cannot be reached, the send latency instruments, and the optional bearer token."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import httpx
import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from channels.db import database_sync_to_async
from django.utils import timezone
from kombu import Connection
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from a2a_platform.celery import app as celery_app
from a2a_platform.metrics import SEND_LATENCY, start_sidecar_metrics_server
from a2a_platform.queues import queue_names
from agents.auth import Principal
from push_app.models import Delivery, DeliveryAttempt, PushConfig
from tasks_app import operations
from tasks_app.errors import InvalidParamsError
from tasks_app.models import STATE_CHOICES, Task, TaskEvent
from tasks_app.operations import Caller
from tasks_app.services import message_send, task_end, task_event_record

from ..conftest import _free_port

ALICE = Principal(owner="key:alice")
ALL_STATES = [name for name, _ in STATE_CHOICES]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(autouse=True)
def metrics_open(settings):
    """Opened as the embedded profile and the live platform open it; the token tests close it."""
    settings.A2A_METRICS_OPEN = True


def scrape(client, **headers: str) -> Samples:
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def tasks_of(samples: Samples, tenant: str) -> dict[tuple[str, str], float]:
    """(agent, state) -> count, for one tenant's agents."""
    found = {}
    for labels, count in named(samples, "a2a_tasks").items():
        label = dict(labels)
        if label["tenant"] == tenant:
            found[label["agent"], label["state"]] = count
    return found


def send(agent, text: str = "hi") -> uuid.UUID:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    return message_send(
        agent=agent, principal=ALICE, request=SendMessageRequest(message=message)
    ).task_id


def move(task_id: uuid.UUID, state: int) -> None:
    event = TaskStatusUpdateEvent(task_id=str(task_id), status=TaskStatus(state=state))
    assert task_event_record(task_id=task_id, event=event)


# --- tasks and push attempts, read from the database ----------------------------------------


@pytest.mark.django_db
def test_tasks_are_counted_per_tenant_agent_and_state(client, make_tenant, make_agent):
    # given two tenants' agents with tasks in several states
    acme, other = make_tenant(), make_tenant()
    echo, slow = make_agent(acme, "echo"), make_agent(acme, "slow")
    theirs = make_agent(other, "echo")
    send(echo)  # submitted
    move(send(echo), TaskState.TASK_STATE_WORKING)
    for _ in range(2):
        move(send(echo), TaskState.TASK_STATE_COMPLETED)
    move(send(slow), TaskState.TASK_STATE_INPUT_REQUIRED)
    task_end(task_id=send(slow), state=TaskState.TASK_STATE_FAILED, reason="broke")
    move(send(theirs), TaskState.TASK_STATE_CANCELED)

    # when Prometheus scrapes
    samples = scrape(client)

    # then every state of each agent with tasks is there, 0 included, counted exactly
    expected = {("echo", s): 0.0 for s in ALL_STATES} | {("slow", s): 0.0 for s in ALL_STATES}
    expected |= {
        ("echo", "TASK_STATE_SUBMITTED"): 1.0,
        ("echo", "TASK_STATE_WORKING"): 1.0,
        ("echo", "TASK_STATE_COMPLETED"): 2.0,
        ("slow", "TASK_STATE_INPUT_REQUIRED"): 1.0,
        ("slow", "TASK_STATE_FAILED"): 1.0,
    }
    assert tasks_of(samples, acme.slug) == expected
    assert tasks_of(samples, other.slug) == {("echo", s): 0.0 for s in ALL_STATES} | {
        ("echo", "TASK_STATE_CANCELED"): 1.0
    }
    assert value(samples, "a2a_database_up") == 1.0


@pytest.mark.django_db
def test_push_attempts_by_outcome_and_dead_deliveries(client, make_tenant, make_agent):
    before = scrape(client)
    # given one task's deliveries: one delivered after a retry, one dead after two retries
    tenant = make_tenant()
    task = Task.objects.get(pk=send(make_agent(tenant, "echo")))
    config = PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/h")
    now = timezone.now()
    outcomes = {"delivered": ["retry", "delivered"], "dead": ["retry", "retry", "dead"]}
    for seq, (state, attempts) in enumerate(outcomes.items(), start=2):
        event = TaskEvent.objects.create(task=task, seq=seq, kind="status_update", data={})
        delivery = Delivery.objects.create(
            config=config, event=event, seq=seq, state=state, next_attempt_at=now
        )
        for n, outcome in enumerate(attempts):
            DeliveryAttempt.objects.create(
                delivery=delivery, started_at=now + timedelta(seconds=n), outcome=outcome
            )

    # when Prometheus scrapes again
    after = scrape(client)

    # then the counter grew by exactly those attempts, and one more delivery is dead
    def grew(name: str, **labels: str) -> float:
        return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)

    grown = {o: grew("a2a_push_attempts_total", outcome=o) for o in ("delivered", "retry", "dead")}
    assert grown == {"delivered": 1, "retry": 3, "dead": 1}
    assert grew("a2a_push_deliveries_dead") == 1


# --- Celery queue depth, read from the broker -----------------------------------------------


def filesystem_broker(settings, folder) -> dict[str, str]:
    options = {
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "control_folder": str(folder / "control"),
    }
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = options
    return options


@pytest.mark.django_db
def test_queue_depth_counts_the_jobs_waiting_in_the_broker(client, settings, tmp_path):
    # given the embedded broker with three jobs waiting in the default queue
    options = filesystem_broker(settings, tmp_path)
    (tmp_path / "queue").mkdir()
    default = celery_app.conf.task_default_queue
    with Connection("filesystem://", transport_options=options) as connection:
        queue = connection.SimpleQueue(default)
        for n in range(3):
            queue.put({"n": n})

    samples = scrape(client)

    depths = {
        dict(labels)["queue"]: v for labels, v in named(samples, "a2a_celery_queue_depth").items()
    }
    assert depths == {**dict.fromkeys(queue_names(), 0), default: 3}
    assert value(samples, "a2a_celery_broker_up") == 1.0


@pytest.mark.django_db
def test_an_unreadable_embedded_broker_is_down_and_has_no_depth(client, settings, tmp_path):
    filesystem_broker(settings, tmp_path / "gone")  # its queue folder does not exist

    samples = scrape(client)

    assert named(samples, "a2a_celery_queue_depth") == {}
    assert value(samples, "a2a_celery_broker_up") == 0.0
    assert value(samples, "a2a_database_up") == 1.0  # the rest of the scrape is still there


@pytest.mark.django_db
def test_an_unreachable_redis_broker_is_down_and_has_no_depth(client, settings):
    # given a Redis broker URL where nothing listens
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_free_port()}/0"

    samples = scrape(client)

    assert named(samples, "a2a_celery_queue_depth") == {}
    assert value(samples, "a2a_celery_broker_up") == 0.0


# --- send latency, around the operations every binding calls --------------------------------


def observed(method: str, dialect: str, outcome: str) -> float:
    """How many sends this process has observed with these labels (no scrape: some of the
    callers below are coroutines, where the storage collector's queries may not run)."""
    labels = {"method": method, "dialect": dialect, "outcome": outcome}
    (family,) = SEND_LATENCY.collect()
    counts = [s.value for s in family.samples if s.name.endswith("_count") and s.labels == labels]
    assert len(counts) == 1  # every (method, dialect, outcome) series exists from the start
    return counts[0]


@pytest.mark.django_db
def test_a_refused_send_is_observed_as_an_error(make_tenant, make_agent):
    caller = Caller(agent=make_agent(make_tenant(), "echo"), principal=ALICE)
    before = {
        labels: observed(*labels)
        for labels in [
            ("SendMessage", "1.0", "error"),
            ("SendMessage", "1.0", "ok"),
            ("SendStreamingMessage", "1.0", "error"),
            ("SendStreamingMessage", "1.0", "ok"),
        ]
    }

    with pytest.raises(InvalidParamsError, match="tenant"):
        asyncio.run(
            operations.message_send(
                caller=caller, request=SendMessageRequest(tenant="someone/else")
            )
        )
    resuming = Caller(agent=caller.agent, principal=ALICE, last_event_id="garbage")
    with pytest.raises(InvalidParamsError, match="Last-Event-ID"):
        asyncio.run(operations.message_stream(caller=resuming, request=SendMessageRequest()))

    grown = {labels: observed(*labels) - count for labels, count in before.items()}
    assert grown == {
        ("SendMessage", "1.0", "error"): 1,
        ("SendMessage", "1.0", "ok"): 0,
        ("SendStreamingMessage", "1.0", "error"): 1,
        ("SendStreamingMessage", "1.0", "ok"): 0,
    }


@pytest.mark.django_db(transaction=True)
def test_a_stream_is_observed_at_its_first_event_not_at_keepalives(
    settings, make_tenant, make_agent
):
    # given a working task (made directly: nothing is queued for a worker) and a stream that
    # resumes it from the start (SendStreamingMessage with Last-Event-ID)
    settings.A2A_SSE_KEEPALIVE_SECONDS = 0.1
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    task = Task.objects.create(
        tenant=tenant,
        agent=agent,
        context_id="c",
        owner=ALICE.owner,
        state="TASK_STATE_WORKING",
        status_timestamp=timezone.now(),
    )
    ok, error = (observed("SendStreamingMessage", "0.3", o) for o in ("ok", "error"))

    async def keepalive_then_event() -> tuple[float, float]:
        caller = Caller(agent=agent, principal=ALICE, last_event_id=f"{task.pk}:0", dialect="0.3")
        stream = await operations.message_stream(caller=caller, request=SendMessageRequest())
        try:
            assert await anext(stream) is None  # a keep-alive: no event yet
            at_keepalive = observed("SendStreamingMessage", "0.3", "ok")
            await database_sync_to_async(move)(task.pk, TaskState.TASK_STATE_WORKING)
            while (item := await anext(stream)) is None:
                pass
            assert item.seq == 1
            return at_keepalive, observed("SendStreamingMessage", "0.3", "ok")
        finally:
            await stream.aclose()

    assert asyncio.run(keepalive_then_event()) == (ok, ok + 1)

    # and a stream its client leaves before any event is not observed at all
    async def left_early() -> None:
        caller = Caller(agent=agent, principal=ALICE, last_event_id=f"{task.pk}:1", dialect="0.3")
        stream = await operations.message_stream(caller=caller, request=SendMessageRequest())
        assert await anext(stream) is None
        await stream.aclose()

    asyncio.run(left_early())
    assert observed("SendStreamingMessage", "0.3", "ok") == ok + 1
    assert observed("SendStreamingMessage", "0.3", "error") == error


# --- the optional token ---------------------------------------------------------------------


@pytest.mark.django_db
def test_without_a_token_metrics_are_closed_unless_opened(client, settings):
    settings.A2A_METRICS_TOKEN = ""
    settings.A2A_METRICS_OPEN = False
    response = client.get("/metrics")
    assert response.status_code == 403
    assert b"A2A_METRICS_TOKEN" in response.content and b"a2a_tasks" not in response.content
    settings.A2A_METRICS_OPEN = True
    assert value(scrape(client), "a2a_database_up") == 1.0


@pytest.mark.django_db
def test_with_a_token_scrapes_must_send_it_as_a_bearer_token(client, settings):
    settings.A2A_METRICS_TOKEN = "s3cret-token"

    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret-token"}):
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
        assert b"a2a_" not in response.content

    for authorization in ("Bearer s3cret-token", "bearer s3cret-token"):
        assert value(scrape(client, Authorization=authorization), "a2a_database_up") == 1.0


@pytest.mark.django_db
def test_metrics_are_read_only(client):
    assert client.post("/metrics").status_code == 405
    assert client.head("/metrics").status_code == 200


def test_the_sidecar_port_refuses_as_metrics_does(settings):
    """The sidecar's metrics port answers like daphne's /metrics: closed (403, saying what to
    set) without a token unless opened, 401 without the token once one is set."""
    server = start_sidecar_metrics_server(f"127.0.0.1:{_free_port()}")
    url = f"http://127.0.0.1:{server.server_port}/"
    try:
        settings.A2A_METRICS_TOKEN, settings.A2A_METRICS_OPEN = "", False
        closed = httpx.get(url)
        assert closed.status_code == 403 and "A2A_METRICS_TOKEN" in closed.text
        settings.A2A_METRICS_OPEN = True
        assert "a2a_send_latency_seconds" in httpx.get(url).text
        settings.A2A_METRICS_TOKEN = "s3cret"
        refused = httpx.get(url)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"]
        assert httpx.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 200
    finally:
        server.shutdown()
        server.server_close()
