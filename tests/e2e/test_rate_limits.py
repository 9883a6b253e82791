"""Request rates end to end (docs/limits.md): the official a2a-sdk client on JSON-RPC, REST and
gRPC, in v1.0 and v0.3, against real daphne, gRPC sidecar and worker processes counting in the
suite's Redis.

A call over a rate gets its binding's answer (HTTP 429 with Retry-After, or RESOURCE_EXHAUSTED)
naming the limit (ErrorInfo RATE_LIMITED with its metadata) and the wait (RetryInfo); it writes
nothing; after the wait the same call goes through. The tests never assume how fast the machine
is: a one-second burst is filled by calling until a call is refused, and a minute's rate by at
most 60 times it calls, which take far less than a minute.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import redis
from a2a.client import A2AClientError
from a2a.types import ListTasksRequest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from prometheus_client.parser import text_string_to_metric_families

from agents import rates
from agents.models import ApiKey, Plan, Tenant
from tasks_app.models import TERMINAL_STATES, Task

from ..conftest import _free_port, start_web, stop_process
from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import V1_0_HEADERS, mid, rpc_body, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@dataclass
class Refusal:
    """A refused call as any binding answered it."""

    status: str  # "429" or the gRPC status code's name
    reason: str
    metadata: dict[str, str]
    retry_delay: float  # RetryInfo, seconds
    headers: dict[str, str]
    body: Any


def refusal_of(error: BaseException) -> Refusal:
    """The binding's answer inside the SDK's error: the HTTP response or the gRPC status."""
    cause = error.__cause__
    if isinstance(cause, grpc.aio.AioRpcError):
        status = rpc_status.from_call(cause)
        assert status is not None, cause
        info, retry = error_details_pb2.ErrorInfo(), error_details_pb2.RetryInfo()
        assert [status.details[0].Unpack(info), status.details[1].Unpack(retry)] == [True, True]
        assert info.domain == "a2a-protocol.org"
        return Refusal(
            cause.code().name,
            info.reason,
            dict(info.metadata),
            retry.retry_delay.ToMilliseconds() / 1000,
            {},
            status.message,
        )
    assert isinstance(cause, httpx.HTTPStatusError), repr(error)
    response = cause.response
    body = response.json()
    # JSON-RPC carries the details in the error's data, REST in the Status's details.
    details = body["error"].get("data") or body["error"]["details"]
    info, retry = details
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo", details
    assert retry["@type"] == "type.googleapis.com/google.rpc.RetryInfo", details
    assert retry["retryDelay"].endswith("s")
    return Refusal(
        str(response.status_code),
        info["reason"],
        info["metadata"],
        float(retry["retryDelay"][:-1]),
        dict(response.headers),
        body,
    )


def tasks_of(tenant: Tenant) -> int:
    return Task.objects.filter(tenant=tenant).count()


def runs_ended(tenant: Tenant) -> None:
    """Until the runs the test started have ended: the worker is not writing while the next
    test's set-up empties the tables."""
    wait_until(
        lambda: not Task.objects.filter(tenant=tenant).exclude(state__in=TERMINAL_STATES).exists(),
        timeout=60,
        what="the runs to end",
    )


def limit(tenant: Tenant | None = None, key: str | None = None, **values: int) -> None:
    """Set a tenant's or a key's own limits (before its first call: the web processes keep
    what they read for A2A_AUTH_CACHE_SECONDS)."""
    if tenant is not None:
        Tenant.objects.filter(pk=tenant.pk).update(limits=values)
    if key is not None:
        ApiKey.objects.filter(prefix=key.split("_")[1]).update(limits=values)


# --- the answer on every binding and version -------------------------------------------------


@pytest.mark.parametrize("version", [V1_0, V0_3])
@pytest.mark.parametrize("binding", [JSONRPC, HTTP_JSON, GRPC])
def test_a_key_over_its_rate_is_refused_writes_nothing_and_gets_in_after_the_wait(
    live_platform, make_tenant, make_agent, make_key, binding, version
):
    tenant = make_tenant()
    url = live_platform.agent_url(make_agent(tenant, "echo"))
    key = make_key(tenant, "alice")
    limit(key=key, key_request_burst=1)

    async def scenario():
        async with sdk_client(url, key=key, version=version, binding=binding, polling=True) as c:
            sent = 0
            for _ in range(30):  # the first call of a second goes in, the next is refused
                message = user_message("hello", mid())
                before = await asyncio.to_thread(tasks_of, tenant)
                try:
                    await send(c, message)
                except A2AClientError as error:
                    refused, said = refusal_of(error), str(error)
                    break
                sent += 1
            else:
                raise AssertionError("no call was refused")
            after_refusal = await asyncio.to_thread(tasks_of, tenant)
            await asyncio.sleep(refused.retry_delay)
            task = (await send(c, message)).task  # the refused call, again
            after_retry = await asyncio.to_thread(tasks_of, tenant)
            return sent, before, after_refusal, refused, said, task, after_retry

    sent, before, after_refusal, refused, said, task, after_retry = asyncio.run(scenario())
    assert sent >= 1
    assert (refused.reason, refused.metadata) == (
        "RATE_LIMITED",
        {"limit": "key_request_burst", "value": "1", "scope": "key"},
    )
    assert 0 < refused.retry_delay <= 1.001
    if binding == GRPC:
        assert refused.status == "RESOURCE_EXHAUSTED"
        assert "RESOURCE_EXHAUSTED" in said  # what the SDK's client says of it
        assert "This API key is over its burst of 1 request in one second" in refused.body
    else:
        assert refused.status == "429"
        assert refused.headers["retry-after"] == "1"
        assert refused.headers["ratelimit-policy"] == '"key_request_burst";q=1;w=1'
        assert refused.headers["ratelimit"] == '"key_request_burst";r=0;t=1'
        error = refused.body["error"]
        if binding == JSONRPC:
            assert error["code"] == -32054
        else:
            assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
            if version == V0_3:  # v0.3's REST clients read the type and message
                assert refused.body["type"] == "RateLimited"
                assert refused.body["message"] == error["message"]
        assert "This API key is over its burst of 1 request in one second" in error["message"]
    assert before == after_refusal == sent  # the refused send made no task
    assert task.id and after_retry == sent + 1
    runs_ended(tenant)


# --- whose rate -----------------------------------------------------------------------------


def test_a_tenants_rate_is_shared_by_its_keys(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    url = live_platform.agent_url(make_agent(tenant, "echo"))
    alice, bob = make_key(tenant, "alice"), make_key(tenant, "bob")
    limit(tenant, requests_per_second=1)  # 60 calls in any minute

    with httpx.Client(timeout=60, headers=V1_0_HEADERS) as http:
        answers = [list_tasks(http, url, key) for key in [alice] * 30 + [bob] * 30]
        assert {a.status_code for a in answers} == {200}
        refused = list_tasks(http, url, alice)
    assert refused.status_code == 429, refused.text
    error = refused.json()["error"]
    assert error["code"] == -32054
    assert error["data"][0]["metadata"] == {
        "limit": "requests_per_second",
        "value": "1",
        "scope": "tenant",
    }
    assert error["message"].startswith(f"Tenant {tenant.slug} is over its rate of 1 request")


def test_a_keys_own_rate_wins_over_its_plans(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    plan = Plan.objects.create(name=f"small-{uuid.uuid4()}", key_request_burst=1)
    Tenant.objects.filter(pk=tenant.pk).update(plan=plan)
    url = live_platform.agent_url(make_agent(tenant, "echo"))
    own, plain = make_key(tenant, "own"), make_key(tenant, "plain")
    limit(key=own, key_request_burst=3)

    with httpx.Client(timeout=60, headers=V1_0_HEADERS) as http:
        for key, value in ((own, "3"), (plain, "1")):
            admitted, refused = call_until_refused(lambda k=key: list_tasks(http, url, k))
            metadata = refused.json()["error"]["data"][0]["metadata"]
            assert metadata == {"limit": "key_request_burst", "value": value, "scope": "key"}
            assert admitted >= int(value)


def test_a_tenant_without_rates_makes_no_redis_call(
    live_platform, make_tenant, make_agent, make_key
):
    """What the web process sends to Redis while an unlimited tenant's calls are answered,
    watched with MONITOR: nothing of the rate counters; the limited tenant's call after them
    shows the watch sees them when they happen."""
    free, limited = make_tenant(), make_tenant()
    free_url = live_platform.agent_url(make_agent(free, "echo"))
    limited_url = live_platform.agent_url(make_agent(limited, "echo"))
    free_key, limited_key = make_key(free), make_key(limited)
    limit(limited, request_burst=1000)

    with (
        watch_redis(live_platform.env["REDIS_URL"]) as seen,
        httpx.Client(timeout=60, headers=V1_0_HEADERS) as http,
    ):
        for _ in range(20):
            assert list_tasks(http, free_url, free_key).status_code == 200
        free_done = len(seen())
        assert list_tasks(http, limited_url, limited_key).status_code == 200
    counted = [c for c in seen() if rates.KEY_PREFIX in c]
    assert not [c for c in seen()[:free_done] if rates.KEY_PREFIX in c]
    assert [c for c in counted if f"tenant/{limited.pk}/" in c], seen()
    assert not [c for c in counted if f"tenant/{free.pk}/" in c]


# --- many processes -------------------------------------------------------------------------


def test_two_web_processes_count_one_rate(live_platform, make_tenant, make_agent, make_key):
    """A second daphne on the same database and Redis (as `make run` starts one per core): a
    tenant's calls through both count against one rate."""
    port = _free_port()
    other = start_web(
        port,
        {**live_platform.env, "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}"},
        live_platform.log_dir / "rates-second-daphne.log",
    )
    try:
        tenant = make_tenant()
        agent = make_agent(tenant, "echo")
        key = make_key(tenant)
        limit(tenant, requests_per_second=1)
        urls = [
            live_platform.agent_url(agent),
            f"http://127.0.0.1:{port}/a2a/{tenant.slug}/{agent.slug}/",
        ]
        with httpx.Client(timeout=60, headers=V1_0_HEADERS) as http:
            answers = [list_tasks(http, url, key) for url in urls * 30]
            assert {a.status_code for a in answers} == {200}
            refused = [list_tasks(http, url, key) for url in urls]
    finally:
        stop_process(other)
    assert [r.status_code for r in refused] == [429, 429]
    assert {r.json()["error"]["data"][0]["metadata"]["scope"] for r in refused} == {"tenant"}


# --- each binding's order of refusals ------------------------------------------------------


def test_json_rpc_refusals_keep_their_order_and_a_batch_answers_each_call(
    live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    url = live_platform.agent_url(make_agent(tenant, "echo"))
    key = make_key(tenant)
    limit(tenant, requests_per_second=1)
    headers = {**V1_0_HEADERS, "X-API-Key": key}

    with httpx.Client(timeout=60, headers=headers) as http:
        for _ in range(58):
            assert list_tasks(http, url, key).status_code == 200
        # A batch of three with two calls of the minute left: the third is refused in its
        # place, the others answered; the batch itself is HTTP 200.
        batch = [rpc_body("ListTasks", {}, request_id=i) for i in (1, 2, 3)]
        answered = http.post(url, json=batch)
        assert answered.status_code == 200, answered.text
        items = {item["id"]: item for item in answered.json()}
        assert "result" in items[1] and "result" in items[2]
        assert items[3]["error"]["code"] == -32054
        # Over the rate, a body that is not JSON is still answered as such, uncounted.
        garbled = http.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
        assert garbled.status_code == 200 and garbled.json()["error"]["code"] == -32700
        # A stream refused before it starts is an error answer, not an event stream.
        stream = http.post(url, json=rpc_body("SendStreamingMessage", {"message": _message()}))
        assert stream.status_code == 429
        assert stream.headers["content-type"].startswith("application/json")
        assert stream.json()["error"]["code"] == -32054
        # v0.1 (the legacy dialect) gets the same code: -32000..-32099 are its server errors.
        legacy = http.post(
            url,
            json=rpc_body("tasks/get", {"id": str(uuid.uuid4())}),
            headers={"A2A-Version": "0.1"},
        )
        assert legacy.status_code == 429 and legacy.json()["error"]["code"] == -32054
    assert tasks_of(tenant) == 0


def test_a_grpc_stream_refused_before_it_starts_is_resource_exhausted(
    live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    url = live_platform.agent_url(make_agent(tenant, "echo"))
    key = make_key(tenant)
    limit(tenant, requests_per_second=1)

    async def scenario():
        async with sdk_client(url, key=key, binding=GRPC) as client:
            for _ in range(60):
                await client.list_tasks(ListTasksRequest())
        async with sdk_client(url, key=key, binding=GRPC, streaming=True) as client:
            with pytest.raises(A2AClientError) as raised:
                await send(client, user_message("hello", mid()))
            return refusal_of(raised.value)

    refused = asyncio.run(scenario())
    assert (refused.status, refused.metadata["limit"]) == (
        "RESOURCE_EXHAUSTED",
        "requests_per_second",
    )
    assert tasks_of(tenant) == 0


# --- helpers --------------------------------------------------------------------------------


def _message() -> dict[str, Any]:
    return {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "hi"}]}


def list_tasks(http: httpx.Client, url: str, key: str | None) -> httpx.Response:
    headers = {"X-API-Key": key} if key else {}
    return http.post(url, json=rpc_body("ListTasks", {}), headers=headers)


def call_until_refused(call: Callable[[], httpx.Response], most: int = 50) -> tuple[int, Any]:
    """Calls answered before the first 429 (a burst fills within its second unless the
    machine stalls, when counting goes on), and the 429."""
    for admitted in range(most):
        response = call()
        if response.status_code == 429:
            return admitted, response
        assert response.status_code == 200, response.text
    raise AssertionError(f"{most} calls were answered")


class watch_redis:
    """Every command Redis runs while the block does (MONITOR), as text; `seen()` so far."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.commands: list[str] = []
        self.marker = f"watch-done-{uuid.uuid4()}"

    def __enter__(self) -> Callable[[], list[str]]:
        started = threading.Event()
        self.thread = threading.Thread(target=self._watch, args=(started,), daemon=True)
        self.thread.start()
        assert started.wait(10)
        return lambda: list(self.commands)

    def _watch(self, started: threading.Event) -> None:
        with self.client.monitor() as monitor:
            started.set()
            for command in monitor.listen():
                text = command["command"]
                if self.marker in text:
                    return
                self.commands.append(text)

    def __exit__(self, *exc: Any) -> None:
        self.client.echo(self.marker)
        self.thread.join(10)
        self.client.close()


def test_the_fallback_counter_is_on_the_web_processs_metrics(live_platform):
    text = httpx.get(f"{live_platform.url}/metrics", timeout=30).text
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples["a2a_rate_limit_fallback_total"] == 0  # the suite's Redis is up
