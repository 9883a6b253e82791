"""Every address a card gives is usable from where the card was fetched, with no proxy and no
host entry: a platform set as `make run` sets it (scripts/run.sh: a sidecar port per agent,
A2A_GRPC_AGENT_PORTS; the sidecar's public host 127.0.0.1; agent hosts under .localhost; a
default agent) gives each agent's v0.3 GRPC interfaces at that agent's own port, which the
a2a-sdk's v0.3 gRPC client, with a plain `grpc.aio.insecure_channel` and no `a2a-agent`
metadata, follows to that agent and not the default one. And the platform's origin is the
default agent's server on every binding (REST v0.3 under /v1/, REST v1.0, JSON-RPC `POST /`),
or a clear 404 in each binding's format when there is no default agent."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.types import AgentCard, AgentInterface, GetExtendedAgentCardRequest, Task, TaskState
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from django.db import connection
from grpc_health.v1 import health_pb2, health_pb2_grpc

from a2a_platform.startup import port_in_use
from agents.models import Agent

from ..conftest import _free_port, start_grpc, start_web, stop_process
from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, ServiceParameters, send, user_message
from .helpers import mid, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The agent at the origin: made again by each test that needs it, under the same slugs.
DEFAULT_TENANT, DEFAULT_AGENT = f"origin-{uuid.uuid4().hex[:8]}", "default"
# Room for the agents this module's tests make.
AGENT_PORTS = 40


@dataclass
class AsMakeRun:
    url: str  # the origin
    grpc_address: str  # the sidecar's main port, every agent's
    first_port: int  # A2A_GRPC_AGENT_PORTS's first: agent 1's port

    def agent_port(self, agent: Agent) -> int:
        return self.first_port + agent.pk - 1

    def agent_url(self, agent: Agent) -> str:
        return f"{self.url}/a2a/{agent.tenant.slug}/{agent.slug}/"


def _free_ports(count: int) -> int:
    """The first of `count` consecutive ports nothing listens on, below the range the other
    tests' free ports come from, at a random place (other test sessions may run here too)."""
    for _ in range(100):
        first = random.randrange(20_000, 32_000 - count)
        if not any(port_in_use("127.0.0.1", port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} free ports in a row below 32000")


@pytest.fixture(scope="module")
def as_make_run(live_platform, django_db_blocker, tmp_path_factory) -> Iterator[AsMakeRun]:
    """A web process and a sidecar on the live platform's database, broker and workers, set
    as scripts/run.sh sets them: the agents this module makes have ports of their own (the
    range starts where the next agent id lands), cards give 127.0.0.1, the default agent is
    DEFAULT_TENANT/DEFAULT_AGENT. Nothing in front of either."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("SELECT nextval(pg_get_serial_sequence(%s, 'id'))", [Agent._meta.db_table])
        next_id = cursor.fetchone()[0] + 1
    window = _free_ports(AGENT_PORTS)
    first = window - next_id + 1
    port, grpc_port = _free_port(), _free_port()
    env = {
        **live_platform.env,
        "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "A2A_GRPC_PUBLIC_ADDRESS": f"127.0.0.1:{grpc_port}",
        "A2A_GRPC_AGENT_PORTS": f"{first}-{window + AGENT_PORTS - 1}",
        "A2A_DEFAULT_AGENT": f"{DEFAULT_TENANT}/{DEFAULT_AGENT}",
        # Each test makes the default agent again under the same slugs: no process may go on
        # using the row of an earlier test's.
        "A2A_AUTH_CACHE_SECONDS": "0",
    }
    log_dir = tmp_path_factory.mktemp("as-make-run")
    with ThreadPoolExecutor(max_workers=2) as pool:
        starting = [
            pool.submit(start_web, port, env, log_dir / "daphne.log"),
            pool.submit(start_grpc, f"127.0.0.1:{grpc_port}", env, log_dir / "grpc.log"),
        ]
    started = [f.result() for f in starting if f.exception() is None]
    try:
        for f in starting:
            if f.exception() is not None:
                raise f.exception()  # type: ignore[misc]
        yield AsMakeRun(f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}", first)
    finally:
        for proc in started:
            stop_process(proc)


@pytest.fixture
def default_agent(make_tenant, make_agent, make_key) -> tuple[Agent, str]:
    """The origin's agent, with an extended skill (what tells its extended card), and a key."""
    tenant = make_tenant(DEFAULT_TENANT)
    skill = {"id": "more", "name": "More", "description": "Only with a key.", "tags": ["x"]}
    agent = make_agent(tenant, DEFAULT_AGENT, extended_skills=[skill])
    return agent, make_key(tenant)


def _card(url: str) -> dict[str, Any]:
    response = httpx.get(url + ".well-known/agent-card.json", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _grpc_urls(card: dict[str, Any], version: str) -> list[str]:
    return [
        i["url"]
        for i in card["supportedInterfaces"]
        if i["protocolBinding"] == GRPC and i["protocolVersion"] == version
    ]


def _serving(address: str) -> bool:
    with grpc.insecure_channel(address) as channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
        except grpc.RpcError:
            return False
    return answer.status == health_pb2.HealthCheckResponse.SERVING


async def _v03_grpc_send(card_url: str, key: str, text: str) -> Task:
    """A message sent by the a2a-sdk's v0.3 gRPC client, built by its factory from the card
    at `card_url` (its v0.3 GRPC interfaces: a client that speaks only v0.3), with the plain
    channel factory and no metadata but the key."""
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, card_url).get_agent_card()
    v03 = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding == GRPC and i.protocol_version == V0_3
    ]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(v03)
    config = ClientConfig(
        streaming=False,
        supported_protocol_bindings=[GRPC],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    client = ClientFactory(config).create(card, [ServiceParameters({"x-api-key": key})])
    try:
        return (await send(client, user_message(text, mid()))).task
    finally:
        await client.close()


def _task_at(url: str, key: str, task_id: str) -> int:
    """The status of GetTask (REST v1.0) for `task_id` at the agent at `url`."""
    return httpx.get(f"{url}tasks/{task_id}", headers={"X-API-Key": key}, timeout=30).status_code


def _refusal(call: Any) -> str:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value
    return caught.value.details()


def test_the_sdks_v03_grpc_client_follows_a_card_to_its_agent_not_the_default(
    as_make_run, default_agent, make_target
):
    default, default_key = default_agent
    # given an agent that is not the default one, made after the sidecar started
    echo = make_target("echo")
    url, port = as_make_run.agent_url(echo.agent), as_make_run.agent_port(echo.agent)
    # then its card's v0.3 GRPC interfaces give its own port at 127.0.0.1, first as the target
    # the SDK's channel factory takes, then as the URL the 0.3 TCK reads; v1.0's is unchanged
    card = _card(url)
    assert _grpc_urls(card, V0_3) == [f"127.0.0.1:{port}", f"grpc://127.0.0.1:{port}"]
    assert _grpc_urls(card, "1.0") == [as_make_run.grpc_address]
    assert ".localhost" not in json.dumps(card)
    # ... which the sidecar serves within its poll
    wait_until(lambda: _serving(f"127.0.0.1:{port}"), timeout=60, what=f"port {port}")
    # when the SDK's v0.3 gRPC client follows the card, naming no agent
    task = asyncio.run(_v03_grpc_send(url, echo.key, "to echo by its port"))
    # then the task is echo's: its answer, found at echo's URL and not at the default agent's
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "to echo by its port" in str(task.artifacts)
    assert _task_at(url, echo.key, task.id) == 200
    assert _task_at(as_make_run.agent_url(default), default_key, task.id) == 404
    # and on echo's port a call naming another agent is refused, not routed there
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        request03 = pb03.SendMessageRequest(
            request=pb03.Message(
                message_id=mid(), role=pb03.ROLE_USER, content=[pb03.Part(text="hi")]
            )
        )
        other = f"{DEFAULT_TENANT}/{DEFAULT_AGENT}"
        metadata = [("x-api-key", echo.key), ("a2a-agent", other)]
        details = _refusal(
            lambda: pb03_grpc.A2AServiceStub(channel).SendMessage(
                request03, metadata=metadata, timeout=30
            )
        )
        assert f"came to the port of agent '{echo.tenant_value}'" in details, details
        request10 = pb10.SendMessageRequest(
            tenant=other,
            message=pb10.Message(
                message_id=mid(), role=pb10.ROLE_USER, parts=[pb10.Part(text="hi")]
            ),
        )
        details = _refusal(
            lambda: pb10_grpc.A2AServiceStub(channel).SendMessage(
                request10, metadata=[("x-api-key", echo.key)], timeout=30
            )
        )
        assert f"but names '{other}'" in details, details


def test_an_agent_gets_its_port_when_made_and_loses_it_when_deactivated(as_make_run, make_target):
    # given the sidecar serving one agent's port
    first = make_target("first")
    first_port = as_make_run.agent_port(first.agent)
    wait_until(lambda: _serving(f"127.0.0.1:{first_port}"), timeout=60, what="the first port")
    # when another agent is made
    later = make_target("later")
    address = f"127.0.0.1:{as_make_run.agent_port(later.agent)}"
    # then its port opens at the next read, and its card leads there
    wait_until(lambda: _serving(address), timeout=60, what=f"{address} to open")
    task = asyncio.run(_v03_grpc_send(as_make_run.agent_url(later.agent), later.key, "later"))
    assert _task_at(as_make_run.agent_url(later.agent), later.key, task.id) == 200
    # and when it is deactivated its port closes, while the other agent's serves on
    later.agent.is_active = False
    later.agent.save(update_fields=["is_active"])
    wait_until(lambda: not _serving(address), timeout=60, what=f"{address} to close")
    assert _serving(f"127.0.0.1:{first_port}")


def _origin_client(origin: str, binding: str, key: str | None) -> Any:
    """The SDK's v0.3 client of `binding` whose interface is the origin itself (REST's root,
    JSON-RPC's `/`)."""
    url = origin + "/" if binding == JSONRPC else origin
    card = AgentCard(
        name="origin",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding, protocol_version=V0_3)
        ],
    )
    card.capabilities.extended_agent_card = True
    http = httpx.AsyncClient(timeout=30, headers={"X-API-Key": key} if key else {})
    config = ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=[binding])
    return http, ClientFactory(config).create(card)


async def _at_the_origin(origin: str, key: str) -> tuple[list[str], list[Task]]:
    """What the SDK's v0.3 REST and JSON-RPC clients get at the origin: the extended card's
    skills (REST), and a task sent by each."""
    tasks = []
    skills: list[str] = []
    for binding in (HTTP_JSON, JSONRPC):
        http, client = _origin_client(origin, binding, key)
        async with http:
            if binding == HTTP_JSON:
                card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
                skills = [s.id for s in card.skills]
            tasks.append((await send(client, user_message(f"via {binding}", mid()))).task)
            await client.close()
    return skills, tasks


def test_the_origin_is_the_default_agents_server_on_every_binding(as_make_run, default_agent):
    default, key = default_agent
    origin = as_make_run.url
    # when the SDK's v0.3 clients call the origin: REST under /v1/ (its card at /v1/card) and
    # JSON-RPC at /
    skills, tasks = asyncio.run(_at_the_origin(origin, key))
    # then the default agent answers: its extended card, and the tasks are its own
    assert skills == ["more"]  # the public card has the default skill alone
    for task in tasks:
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert _task_at(as_make_run.agent_url(default), key, task.id) == 200
    with httpx.Client(base_url=origin, timeout=30) as http:
        # the extended card needs credentials: 401 in REST's own shape without them
        refused = http.get("/v1/card")
        assert refused.status_code == 401, refused.text
        assert refused.json()["error"]["status"] == "UNAUTHENTICATED"
        # the REST v1.0 paths are the default agent's too
        listed = http.get("/tasks", headers={"X-API-Key": key})
        assert listed.status_code == 200, listed.text
        assert {t["id"] for t in listed.json()["tasks"]} == {t.id for t in tasks}
        extended = http.get("/extendedAgentCard", headers={"X-API-Key": key})
        assert [s["id"] for s in extended.json()["skills"]] == ["more"]
        # and the platform's own paths are unchanged: `/` is the console's, health is the web's
        front = http.get("/")
        assert front.status_code == 302 and front.headers["location"] == "/console/"
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/.well-known/jwks.json").status_code == 200
        assert http.get("/api/schema/").status_code == 200


def test_without_a_default_agent_the_origin_says_so_in_each_bindings_format(live_platform):
    with httpx.Client(base_url=live_platform.url, timeout=30) as http:
        # REST v0.3 (the kit's /v1/card too) and REST v1.0: a google.rpc.Status NOT_FOUND
        for method, path in (
            ("GET", "/v1/card"),
            ("POST", "/v1/message:send"),
            ("POST", "/message:send"),
            ("GET", "/tasks/abc"),
        ):
            answer = http.request(method, path, json={})
            assert answer.status_code == 404, (path, answer.text)
            error = answer.json()["error"]
            assert error["status"] == "NOT_FOUND", path
            assert "no default agent" in error["message"], path
            assert error["details"][0]["reason"] == "AGENT_NOT_FOUND", path
        # JSON-RPC POSTed to /: its own envelope
        answer = http.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "message/send"})
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["code"] == -32051
        assert "no default agent" in answer.json()["error"]["message"]
        # and a GET of / is still the console's
        front = http.get("/")
        assert front.status_code == 302 and front.headers["location"] == "/console/"
