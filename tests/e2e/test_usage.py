"""Usage metering end to end: real daphne, gRPC sidecar and Celery workers count what a tenant's
`openai` agent does while the official a2a-sdk client sends it messages over JSON-RPC, HTTP+JSON
and gRPC, against a real OpenAI-compatible server on 127.0.0.1 that reports token usage
(tests/e2e/fake_openai.py), and a real webhook receiver for push. Once the processes have
flushed, the day row holds exactly the runs made, the tokens the model reported and the push
POSTs attempted; the console's page, its exports and /metrics show those numbers to whom they
belong (another tenant's people get 404). Then the processes' exit: what a web process and a
worker counted is written when they stop, before their interval ends.

No timing is asserted: waits are bounded only so that a broken platform fails."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from typing import Any

import httpx
import pytest
from a2a.types import (
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from django.contrib.auth import get_user_model
from django.db.models import Sum
from django.test import Client
from django.urls import reverse
from prometheus_client.parser import text_string_to_metric_families

from agents import usage
from agents.models import Membership, UsageDay
from push_app.models import Delivery, DeliveryAttempt

from ..conftest import ROOT, _free_port, _wait_for_port, stop_process
from .clients import GRPC, HTTP_JSON, JSONRPC, sdk_client, user_message
from .fake_openai import FakeOpenAI, pieces_of, reply_to, usage_of
from .helpers import Target, message, poll, result_of, rpc, wait_until
from .webhook import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LOCAL = ["127.0.0.0/8"]
# Bounds for liveness only: the processes flush every A2A_USAGE_FLUSH_SECONDS (5 s by default).
TIMEOUT = 90


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


def counted(agent: Any, since: date) -> dict[str, float]:
    """The agent's counts from `since` on (a test that runs over midnight UTC spans two rows)."""
    sums = UsageDay.objects.filter(agent=agent, day__gte=since).aggregate(
        **{name: Sum(name) for name in usage.COUNTERS}
    )
    return {name: sums[name] or 0 for name in usage.COUNTERS}


def person(tenant: Any, name: str, role: str = "owner") -> Any:
    user = get_user_model().objects.create(username=f"{name}-{uuid.uuid4().hex[:8]}")
    Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_usage_is_the_runs_tokens_and_pushes_an_openai_agent_made(
    live_platform, make_tenant, make_agent, make_key, upstream, settings, tmp_path
):
    # given: an openai agent of tenant T, whose model reports usage, and a webhook receiver
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL  # saved from this process
    since = usage.today()
    tenant, stranger_tenant = make_tenant(), make_tenant()
    agent = make_agent(
        tenant,
        "model",
        "openai",
        config={"base_url": upstream.url, "model": "echo"},
        executor_secrets={"api_key": "sk-test"},
    )
    key = make_key(tenant)
    url = live_platform.agent_url(agent)
    receiver = Receiver(directory=tmp_path / "hooks").start()
    before = scrape(live_platform.url)
    markers: list[str] = []

    # when: the SDK client sends N messages, over every binding, one of them streamed and one
    # with a push config
    async def scenario() -> None:
        sends = [(JSONRPC, False, True), (HTTP_JSON, True, False), (GRPC, False, False)]
        sends += [(JSONRPC, False, False)]
        for binding, streaming, push in sends:
            marker = f"mark{uuid.uuid4().hex[:12]}"
            markers.append(marker)
            request = SendMessageRequest(
                message=user_message(f"count me over {binding} {marker}", f"m-{uuid.uuid4()}")
            )
            if push:
                request.configuration.CopyFrom(
                    SendMessageConfiguration(
                        task_push_notification_config=TaskPushNotificationConfig(
                            url=f"{receiver.url}/hook", token="t"
                        )
                    )
                )
            async with sdk_client(url, key=key, binding=binding, streaming=streaming) as client:
                responses = [r async for r in client.send_message(request)]
                first = responses[0]
                kind = first.WhichOneof("payload")
                task_id = first.task.id if kind == "task" else getattr(first, kind).task_id
                task = await client.get_task(GetTaskRequest(id=task_id))
                assert task.status.state == TaskState.TASK_STATE_COMPLETED, binding

    try:
        asyncio.run(scenario())
        # every push delivery settled (delivered), so every attempt has been made
        wait_until(
            lambda: (
                Delivery.objects.filter(config__task__agent=agent).exists()
                and not Delivery.objects.filter(
                    config__task__agent=agent, state__in=["pending", "sending"]
                ).exists()
            ),
            timeout=TIMEOUT,
            what="the push deliveries to settle",
        )
    finally:
        receiver.stop()
    runs = len(markers)
    calls = [call for marker in markers for call in upstream.calls(marker)]
    assert len(calls) == runs  # one completion per run
    reported = [usage_of(c.messages, pieces_of(reply_to(c.messages))) for c in calls]
    tokens_in = sum(u["prompt_tokens"] for u in reported)
    tokens_out = sum(u["completion_tokens"] for u in reported)
    attempts = DeliveryAttempt.objects.filter(delivery__config__task__agent=agent).count()
    assert attempts >= 1

    # then: once flushed, the day row holds exactly what was made
    def flushed() -> dict[str, float] | None:
        now = counted(agent, since)
        done = (now["runs"], now["tokens_in"], now["tokens_out"], now["push_deliveries"]) == (
            runs,
            tokens_in,
            tokens_out,
            attempts,
        )
        return now if done and now["requests"] >= 2 * runs else None

    now = poll(flushed, timeout=TIMEOUT, pause=0.5)
    final = counted(agent, since)
    assert now, (
        f"counted {final}; made {runs} runs, {tokens_in}/{tokens_out} tokens, {attempts} POSTs"
    )
    # each message and each GetTask is an A2A call that reached the agent (the cards are not)
    assert final["requests"] == 2 * runs
    assert final["run_seconds"] > 0
    assert final["refused_rate"] == final["refused_quota"] == final["refused_concurrency"] == 0
    assert not UsageDay.objects.filter(tenant=stranger_tenant).exists()

    # the console shows them to the tenant's owner, and to nobody of another tenant
    console = Client()
    console.force_login(person(tenant, "owner"))
    page = console.get(reverse("console:usage", args=[tenant.slug]))
    assert page.status_code == 200
    assert f'data-stat="runs" data-value="{runs}"' in page.content.decode()
    exported = console.get(
        reverse("console:usage-json", args=[tenant.slug]),
        {"from": str(since - timedelta(days=1))},
    ).json()
    assert exported["totals"]["runs"] == runs
    assert exported["totals"]["tokens_in"] == tokens_in
    assert exported["totals"]["tokens_out"] == tokens_out
    assert exported["totals"]["push_deliveries"] == attempts
    assert {row["agent"] for row in exported["rows"]} == {"model"}
    lines = console.get(reverse("console:usage-csv", args=[tenant.slug])).content.decode()
    assert f",model,{int(final['requests'])},{runs}," in lines
    console.force_login(person(stranger_tenant, "member", "member"))
    for name in ("console:usage", "console:usage-json", "console:usage-csv"):
        assert console.get(reverse(name, args=[tenant.slug])).status_code == 404

    # and /metrics: today's totals of the platform, no tenant label (bounded series)
    after = scrape(live_platform.url)
    plain = frozenset()
    assert after[("a2a_usage_runs_total", plain)] - before[("a2a_usage_runs_total", plain)] >= runs
    tokens = ("a2a_usage_tokens_total", frozenset({("direction", "in")}))
    assert after[tokens] - before[tokens] >= tokens_in
    assert not [k for k in after if k[0].startswith("a2a_usage") and "tenant" in dict(k[1])]


# --- exit ----------------------------------------------------------------------------------


@pytest.fixture
def own_processes(live_platform, tmp_path) -> Iterator[Callable[..., Any]]:
    """A web tier and an agents worker of this test's own (the session's worker stopped
    meanwhile, so this one runs the runs), with the given settings; the session's worker comes
    back after."""
    stop_process(live_platform.worker)
    started: list[subprocess.Popen[bytes]] = []

    def start(**env: str) -> tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]]:
        worker = live_platform.start_worker("usage-worker", **env)
        started.append(worker)
        port = _free_port()
        log = tmp_path / "web.log"
        web = subprocess.Popen(
            [sys.executable, "manage.py", "runweb", "--port", str(port), "--processes", "1"],
            cwd=ROOT,
            env={
                **live_platform.env,
                "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
                "A2A_DRAIN_SECONDS": "1",
                **env,
            },
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        started.append(web)
        _wait_for_port(port, web, log)
        ready = poll(lambda: _status(f"http://127.0.0.1:{port}/readyz") == 200, timeout=TIMEOUT)
        assert ready, log.read_text()[-4000:]
        return f"http://127.0.0.1:{port}", web, worker

    try:
        yield start
    finally:
        for proc in started:
            stop_process(proc)
        live_platform.worker = live_platform.start_worker("worker")


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=10).status_code
    except httpx.HTTPError:
        return 0


def test_a_web_process_and_a_worker_write_what_they_counted_when_they_stop(
    own_processes, make_tenant, make_agent, make_key
):
    # given: processes whose interval is an hour: only their stop flushes
    since = usage.today()
    base, web, worker = own_processes(A2A_USAGE_FLUSH_SECONDS="3600")
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key = make_key(tenant)
    url = f"{base}/a2a/{tenant.slug}/{agent.slug}/"
    sends = 3
    with httpx.Client(timeout=60) as http:
        for i in range(sends):
            sent = result_of(
                rpc(http, Target(url, key, agent), "SendMessage", {"message": message(f"hi {i}")})
            )
            assert sent["task"]["status"]["state"] == "TASK_STATE_COMPLETED", sent
    assert not UsageDay.objects.filter(agent=agent).exists()  # nothing flushed yet

    # when: SIGTERM, and each drains and exits
    web.send_signal(signal.SIGTERM)
    assert web.wait(timeout=TIMEOUT) == 0
    # then: the web process's requests are written
    assert counted(agent, since)["requests"] == sends
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=TIMEOUT) == 0
    # and the worker's runs
    assert counted(agent, since)["runs"] == sends
    assert counted(agent, since)["run_seconds"] > 0
