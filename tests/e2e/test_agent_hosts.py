"""Agents at host names of their own (issue: every agent a standalone A2A server).

The live platform runs with A2A_AGENT_HOST_PATTERN `{agent}--{tenant}.localhost` (RFC 6761
names; where the resolver does not map them to 127.0.0.1, the clients here connect there and
keep the name in the Host header, tests/e2e/clients.py). Official a2a-sdk clients follow the
card served at such a host and reach that agent, with its key; the /a2a/ URLs keep working.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.types import TaskState

from tests.conftest import _free_port, _wait_for_port, require, stop_process

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import mid, result_of, rpc_body

HAPROXY = Path(os.environ.get("A2A_HAPROXY_BIN", "").strip() or "/usr/sbin/haproxy")
FRONT_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "haproxy-grpc.cfg"

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def host_of(live_platform, agent) -> str:
    port = live_platform.url.rpartition(":")[2]
    return f"{agent.slug}--{agent.tenant.slug}.localhost:{port}"


@pytest.fixture
def hosted(live_platform, make_tenant, make_agent, make_key):
    """An echo agent, its host (`name:port`), the root URL there, and a key of its tenant."""
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    host = host_of(live_platform, agent)
    return agent, host, f"http://{host}/", make_key(tenant, "alice")


def get_card(live_platform, host: str, path: str = "/.well-known/agent-card.json", **headers):
    return httpx.get(f"{live_platform.url}{path}", headers={"Host": host, **headers})


@pytest.mark.parametrize("path", ["/.well-known/agent-card.json", "/.well-known/agent.json"])
def test_the_card_at_the_agent_host_advertises_that_hosts_urls(live_platform, hosted, path):
    agent, host, root, _ = hosted
    response = get_card(live_platform, host, path)
    assert response.status_code == 200, response.text
    card = response.json()
    assert card["name"] == agent.name
    assert card["url"] == root  # the v0.3 field
    interfaces = {
        (i["protocolBinding"], i["protocolVersion"]): i for i in card["supportedInterfaces"]
    }
    for version in ("1.0", "0.3"):
        assert interfaces[("JSONRPC", version)]["url"] == root
        assert interfaces[("HTTP+JSON", version)]["url"] == root.rstrip("/")
    grpc_port = live_platform.grpc_address.rpartition(":")[2]
    # v0.3 requests carry no `tenant`: the address names the agent by its host.
    v03 = [
        i["url"]
        for i in card["supportedInterfaces"]
        if (i["protocolBinding"], i["protocolVersion"]) == ("GRPC", "0.3")
    ]
    address = f"{host.rpartition(':')[0]}:{grpc_port}"
    assert v03 == [address, f"grpc://{address}"]  # a target, then the same as a URL
    assert interfaces[("GRPC", "1.0")]["tenant"] == f"{agent.tenant.slug}/{agent.slug}"


def test_a_v10_card_request_gets_the_strict_v10_card(live_platform, hosted):
    _, host, root, _ = hosted
    strict = get_card(live_platform, host, **{"A2A-Version": "1.0"})
    combined = get_card(live_platform, host)
    for response in (strict, combined):
        assert response.headers["Vary"] == "A2A-Version"
    assert strict.headers["ETag"] != combined.headers["ETag"]
    card = strict.json()
    for v03_field in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces"):
        assert v03_field not in card
        assert v03_field in combined.json() or v03_field == "additionalInterfaces"
    assert card["supportedInterfaces"][0]["url"] == root


def test_a_host_that_names_no_agent_is_not_found(live_platform, make_tenant):
    tenant = make_tenant()
    port = live_platform.url.rpartition(":")[2]
    response = get_card(live_platform, f"nobody--{tenant.slug}.localhost:{port}")
    assert response.status_code == 404
    assert response.json()["error"] == "agent_not_found"


# v0.3 gRPC names no agent in its requests: it reaches one by its host through the front,
# test_v03_grpc_reaches_the_agent_by_its_host.
@pytest.mark.parametrize(
    "version, binding",
    [(V1_0, JSONRPC), (V1_0, HTTP_JSON), (V1_0, GRPC), (V0_3, JSONRPC), (V0_3, HTTP_JSON)],
)
def test_sdk_clients_follow_the_host_card_and_reach_that_agent(
    live_platform, hosted, make_tenant, make_agent, version, binding
):
    agent, _, root, key = hosted
    # Another agent on the same platform: a wrong route would answer from it.
    make_agent(make_tenant(), "echo")

    async def scenario():
        async with sdk_client(root, key=key, version=version, binding=binding) as client:
            response = await send(client, user_message("at my own host", mid()))
            return response.task

    task = asyncio.run(scenario())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert task.artifacts[0].parts[0].text == "at my own host"
    assert agent.tasks.filter(id=task.id).exists()


@pytest.mark.parametrize("binding", [JSONRPC, HTTP_JSON])
def test_another_tenants_key_is_refused_at_the_agent_host(
    live_platform, hosted, make_tenant, make_agent, make_key, binding
):
    _, _, root, _ = hosted
    other = make_tenant()
    make_agent(other, "echo")
    intruder = make_key(other, "mallory")

    async def scenario():
        async with sdk_client(root, key=intruder, binding=binding) as client:
            await send(client, user_message("let me in", mid()))

    with pytest.raises(A2AClientError, match="401|[Aa]uthentication"):
        asyncio.run(scenario())


def test_jsonrpc_and_rest_paths_sit_at_the_host_root(live_platform, hosted):
    agent, host, _, key = hosted
    headers = {"Host": host, "X-API-Key": key, "A2A-Version": "1.0"}
    body = rpc_body(
        "SendMessage",
        {"message": {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "rpc"}]}},
    )
    task = result_of(httpx.post(f"{live_platform.url}/", json=body, headers=headers))["task"]
    rest = httpx.get(f"{live_platform.url}/tasks/{task['id']}", headers=headers)
    assert rest.status_code == 200 and rest.json()["id"] == task["id"]
    v03 = httpx.get(
        f"{live_platform.url}/v1/tasks/{task['id']}", headers={**headers, "A2A-Version": ""}
    )
    assert v03.status_code == 200 and v03.json()["id"] == task["id"]
    # The tenant's push-signing keys too.
    jwks = httpx.get(f"{live_platform.url}/.well-known/jwks.json", headers=headers)
    tenant_jwks = httpx.get(f"{live_platform.url}/a2a/{agent.tenant.slug}/.well-known/jwks.json")
    assert jwks.status_code == 200 and jwks.json() == tenant_jwks.json()


def test_a_post_without_the_trailing_slash_is_served_not_redirected(live_platform, hosted, http):
    agent, _, _, key = hosted
    url = live_platform.agent_url(agent).rstrip("/")
    body = rpc_body(
        "SendMessage",
        {"message": {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    )
    response = http.post(url, json=body, headers={"X-API-Key": key, "A2A-Version": "1.0"})
    assert response.status_code == 200, response.text
    assert result_of(response)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_custom_domain_serves_its_agent(live_platform, hosted):
    agent, _, _, key = hosted
    domain = f"agent-{uuid.uuid4().hex[:12]}.example.com"
    agent.custom_domain = domain
    agent.save(update_fields=["custom_domain"])
    port = live_platform.url.rpartition(":")[2]
    card = get_card(live_platform, f"{domain}:{port}")
    assert card.status_code == 200, card.text
    assert card.json()["url"] == f"http://{domain}:{port}/"
    grpc_port = live_platform.grpc_address.rpartition(":")[2]
    assert f"{domain}:{grpc_port}" in [i["url"] for i in card.json()["supportedInterfaces"]]
    body = rpc_body(
        "SendMessage",
        {"message": {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "d"}]}},
    )
    answer = httpx.post(
        f"{live_platform.url}/",
        json=body,
        headers={"Host": f"{domain}:{port}", "X-API-Key": key, "A2A-Version": "1.0"},
    )
    assert result_of(answer)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # A domain no agent has is not admitted.
    stranger = get_card(live_platform, f"unknown-{uuid.uuid4().hex[:8]}.example.com")
    assert stranger.status_code == 400


def test_the_origin_card_is_404_without_a_default_agent(live_platform, http):
    response = http.get(f"{live_platform.url}/.well-known/agent-card.json")
    assert response.status_code == 404
    assert "no default agent" in response.json()["message"]


@pytest.fixture(scope="module")
def grpc_front(live_platform, tmp_path_factory):
    """HAProxy in front of the live sidecar with the repo's own config (deploy/): it passes
    each call's authority on, which grpcio does not show the sidecar."""
    require(HAPROXY.exists(), f"HAProxy ({HAPROXY}) is missing: apt-get install haproxy")
    address = f"127.0.0.1:{_free_port()}"
    env = {
        **os.environ,
        "A2A_GRPC_FRONT_LISTEN": address,
        "A2A_GRPC_SIDECAR": live_platform.grpc_address,
    }
    log = tmp_path_factory.mktemp("haproxy") / "haproxy.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(HAPROXY), "-db", "-f", str(FRONT_CONFIG)], env=env, stdout=out, stderr=out
        )
    try:
        _wait_for_port(int(address.rpartition(":")[2]), proc, log)
        yield address
    finally:
        stop_process(proc)


def test_v03_grpc_reaches_the_agent_by_its_host(
    live_platform, hosted, grpc_front, make_tenant, make_agent, make_key
):
    """A v0.3 gRPC client that follows the card sends no `a2a-agent`: the address the card
    gives (the agent's host) is what names the agent, through the front."""
    agent, _, root, key = hosted
    other = make_tenant()
    make_agent(other, "echo")
    intruder = make_key(other, "mallory")

    async def scenario(with_key):
        async with sdk_client(
            root, key=with_key, version=V0_3, binding=GRPC, name_agent=False, grpc_via=grpc_front
        ) as client:
            return (await send(client, user_message("by my host", mid()))).task

    task = asyncio.run(scenario(key))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert agent.tasks.filter(id=task.id).exists()
    with pytest.raises(A2AClientError, match="[Aa]uthentication|UNAUTHENTICATED|401"):
        asyncio.run(scenario(intruder))
