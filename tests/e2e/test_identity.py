"""OAuth 2.0 / OpenID Connect bearer tokens end to end: a real local OpenID provider
(tests/e2e/oidc_provider.py: discovery, key set, token endpoint) that the platform's web and
gRPC processes read over real sockets, and the official a2a-sdk clients calling with its tokens
on JSON-RPC, REST and gRPC in A2A 1.0 and 0.3.

Two users of one tenant each see only their own tasks and push configs; bad tokens (expired,
another audience or issuer, an unknown key, `alg: none`, tampered, HMAC keyed with the public
key, ...) are refused in each binding's own format and write nothing; a provider's key rotation
is picked up without a restart, and a kept key set costs no request to the provider per call;
scopes are checked per operation (403 / PERMISSION_DENIED).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, TaskState
from a2a.types import a2a_pb2_grpc as pb10_grpc
from a2a.utils.errors import TaskNotFoundError
from django.db.models import Sum

from agents.identity import owner_of, protected_resource_metadata_url
from agents.models import Issuer
from agents.services import issuer_create
from audit.models import AuditEvent
from tasks_app.models import Task

from .clients import user_message
from .helpers import V1_0_HEADERS, message, mid, rpc_body
from .oidc_provider import Provider, SigningKey, hmac_signed_with, unsigned
from .test_equivalence import COMBINATIONS, HOOK, connect, state_of, texts

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
CANCELED = TaskState.TASK_STATE_CANCELED
COMPLETED = TaskState.TASK_STATE_COMPLETED


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


@pytest.fixture
def deploy(live_platform, make_tenant, make_agent, provider) -> Callable[..., tuple[str, Any]]:
    """A new tenant with a private echo agent (asking for input, so tasks stay open) whose
    tokens come from `provider`, with the agent's URL as their audience: (URL, agent)."""

    def make(**issuer: Any) -> tuple[str, Any]:
        tenant = make_tenant()
        agent = make_agent(tenant, "echo", config={"input_required": True}, push_notifications=True)
        url = live_platform.agent_url(agent)
        issuer_create(tenant=tenant, issuer=provider.issuer, audiences=[url], **issuer)
        return url, agent

    return make


def issued(provider: Provider, sub: str, audience: str, scope: str = "") -> str:
    """A token from the provider's token endpoint, as a client of it would get one."""
    answer = httpx.post(
        f"{provider.issuer}/token",
        data={"grant_type": "client_credentials", "sub": sub, "audience": audience, "scope": scope},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["token_type"] == "Bearer"
    return answer.json()["access_token"]


# --- two users of one tenant -----------------------------------------------------------------


@pytest.mark.parametrize("combination", COMBINATIONS)
def test_two_users_of_one_tenant_each_see_only_their_own_tasks(
    deploy, provider, combination, make_key
):
    url, agent = deploy()
    alice, bob = issued(provider, "alice", url), issued(provider, "bob", url)
    # A key of the same tenant whose tasks belong to "alice" too, by name: not the same owner.
    key = make_key(agent.tenant, "alice")

    async def scenario() -> None:
        async with (
            connect(url, None, combination, token=alice) as a,
            connect(url, None, combination, token=bob) as b,
            connect(url, key, combination) as k,
        ):
            mine = await a.send(user_message("alice's", mid()))
            theirs = await b.send(user_message("bob's", mid()))
            assert mine.status.state == theirs.status.state == INPUT_REQUIRED
            assert (await a.get(mine.id)).history[0].parts[0].text == "alice's"
            await a.create_push_config(mine.id, config_id="alices-hook", url=HOOK)
            assert [t.id for t in (await a.list_tasks()).tasks] == [mine.id]
            assert [t.id for t in (await b.list_tasks()).tasks] == [theirs.id]
            assert (await k.list_tasks()).total_size == 0
            for other, task_id in ((b, mine.id), (a, theirs.id), (k, mine.id)):
                for read in (other.get, other.raw_get, other.subscribe, other.list_push_configs):
                    with pytest.raises(TaskNotFoundError):
                        await read(task_id)
                with pytest.raises(TaskNotFoundError):
                    await other.get_push_config(task_id, "alices-hook")
                with pytest.raises(TaskNotFoundError):
                    await other.create_push_config(task_id, config_id="theirs", url=HOOK)
                with pytest.raises(TaskNotFoundError):
                    await other.cancel(task_id)
            listed = await a.list_push_configs(mine.id)
            assert [c.id for c in listed.configs] == ["alices-hook"]
            assert (await a.cancel(mine.id)).status.state == CANCELED
            assert (await b.get(theirs.id)).status.state == INPUT_REQUIRED

    asyncio.run(scenario())
    owners = set(Task.objects.filter(agent=agent).values_list("owner", flat=True))
    assert owners == {owner_of(provider.issuer, "alice"), owner_of(provider.issuer, "bob")}


def test_a_follow_up_and_the_stream_work_with_a_token(deploy, provider):
    url, _ = deploy()
    token = provider.token("carol", audience=url, alg="ES256")

    async def scenario() -> None:
        async with connect(url, None, COMBINATIONS[0].values[0], token=token) as c:
            first = await c.send(user_message("first", mid()))
            follow_up = user_message("second", mid(), task_id=first.id, context_id=first.context_id)
            responses = await c.stream(follow_up)
            assert state_of(responses[-1]) == COMPLETED, responses
            assert texts((await c.get(first.id)).artifacts) == ["first\nsecond"]

    asyncio.run(scenario())


# --- refusals -----------------------------------------------------------------------------------


def bad_tokens(provider: Provider, url: str) -> dict[str, tuple[str, str]]:
    """Each bad token, with a fragment of the reason its refusal must give."""
    now = int(time.time())
    good = provider.token("mallory", audience=url)
    header, _, signature = good.split(".")
    forged_payload = provider.token("admin", audience=url).split(".")[1]
    claims = {"iss": provider.issuer, "sub": "mallory", "aud": url, "exp": now + 300}
    return {
        "expired": (
            provider.token("mallory", audience=url, exp=now - 120, iat=now - 400, nbf=now - 400),
            "expired",
        ),
        "not yet valid": (provider.token("mallory", audience=url, nbf=now + 600), "not valid yet"),
        "another audience": (
            provider.token("mallory", audience="https://elsewhere.example/"),
            "audience",
        ),
        "another issuer": (
            provider.token("mallory", audience=url, iss="http://127.0.0.1:1/realms/other"),
            "issuer",
        ),
        "unknown key": (
            provider.token("mallory", audience=url, key=SigningKey.new("RS256")),
            "not in the issuer's key set",
        ),
        "alg none": (unsigned(claims), "'none'"),
        "tampered": (f"{header}.{forged_payload}.{signature}", "signature does not verify"),
        "HMAC keyed with the public key": (
            hmac_signed_with(provider.current.public_pem(), claims, provider.current.kid),
            "'HS256'",
        ),
        "no user": (provider.token("mallory", audience=url, sub=None), "'sub'"),
        "no expiry": (provider.token("mallory", audience=url, exp=None), "'exp'"),
        "not a JWT": ("not-a-key-nor-a-token", "API key is not valid"),
    }


def test_bad_tokens_are_refused_on_every_binding_and_write_nothing(deploy, provider, live_platform):
    url, agent = deploy()
    metadata_url = protected_resource_metadata_url(url)
    grpc_address = live_platform.grpc_address
    tenant_value = f"{agent.tenant.slug}/{agent.slug}"
    for name, (token, reason) in bad_tokens(provider, url).items():
        bearer = {"Authorization": f"Bearer {token}"}
        # JSON-RPC 1.0 and 0.3: HTTP 401, the challenge, the error in JSON-RPC's envelope.
        for version_headers in (V1_0_HEADERS, {}):
            method = "SendMessage" if version_headers else "message/send"
            params = {"message": message("hi")}
            if not version_headers:
                params = {"message": {**message("hi"), "role": "user", "kind": "message"}}
                params["message"]["parts"] = [{"kind": "text", "text": "hi"}]
            answer = httpx.post(
                url,
                content=json.dumps(rpc_body(method, params)),
                headers={"Content-Type": "application/json", **bearer, **version_headers},
            )
            assert answer.status_code == 401, (name, answer.text)
            challenge = answer.headers["WWW-Authenticate"]
            assert challenge.startswith('Bearer realm="a2a"'), (name, challenge)
            assert f'resource_metadata="{metadata_url}"' in challenge, (name, challenge)
            error = answer.json()["error"]
            assert error["code"] == -32050 and reason in error["message"], (name, error)
            if token != "not-a-key-nor-a-token":
                assert 'error="invalid_token"' in challenge, (name, challenge)
                assert error["data"][0]["reason"] == "INVALID_TOKEN", (name, error)
        # REST 1.0: a google.rpc.Status with HTTP 401.
        answer = httpx.post(f"{url}message:send", json={"message": message("hi")}, headers=bearer)
        assert answer.status_code == 401, (name, answer.text)
        status = answer.json()["error"]
        assert status["status"] == "UNAUTHENTICATED" and reason in status["message"], (name, status)
        # gRPC 1.0: UNAUTHENTICATED.
        assert grpc_send(grpc_address, tenant_value, token) == grpc.StatusCode.UNAUTHENTICATED, name
    assert not Task.objects.filter(agent=agent).exists()
    # The audit log counts them per reason (written by each process within
    # A2A_AUDIT_FLUSH_SECONDS), and holds no token.
    tokens = [token for token, _ in bad_tokens(provider, url).values()]

    def counted() -> dict[str, int]:
        failures = AuditEvent.objects.filter(tenant=agent.tenant, action="auth.failure")
        return dict(failures.values_list("reason").annotate(n=Sum("count")))

    # JSON-RPC twice, REST and gRPC: four refusals of each kind.
    expected = {
        "expired": 4,
        "audience not accepted": 4,
        "algorithm not accepted": 8,  # alg none, and HS256
        "API key not valid": 4,
    }
    for _ in range(150):
        reasons = counted()
        if all(reasons.get(why, 0) >= n for why, n in expected.items()):
            break
        time.sleep(0.1)
    assert {why: reasons.get(why) for why in expected} == expected, reasons
    rows = json.dumps(list(AuditEvent.objects.filter(tenant=agent.tenant).values()), default=str)
    assert not [t for t in tokens if t.split(".")[-1] and t.split(".")[-1] in rows]


def grpc_send(address: str, tenant: str, token: str) -> grpc.StatusCode:
    async def call() -> grpc.StatusCode:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = pb10_grpc.A2AServiceStub(channel)
            request = SendMessageRequest(tenant=tenant, message=user_message("hi", mid()))
            try:
                await stub.SendMessage(
                    request, metadata=[("authorization", f"Bearer {token}")], timeout=30
                )
            except grpc.aio.AioRpcError as error:
                return error.code()
            return grpc.StatusCode.OK

    return asyncio.run(call())


# --- the provider's keys ------------------------------------------------------------------------


def get_task(url: str, token: str, task_id: str) -> httpx.Response:
    return httpx.post(
        url,
        content=json.dumps(rpc_body("GetTask", {"id": task_id})),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            **V1_0_HEADERS,
        },
    )


def send_with(url: str, token: str) -> httpx.Response:
    return httpx.post(
        url,
        content=json.dumps(rpc_body("SendMessage", {"message": message("hi")})),
        headers={
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            **V1_0_HEADERS,
        },
    )


def test_a_kept_key_set_costs_no_request_and_a_rotation_is_picked_up_without_a_restart(
    deploy, provider
):
    url, _ = deploy()
    token = provider.token("dave", audience=url)
    sent = send_with(url, token)
    assert sent.status_code == 200 and "result" in sent.json(), sent.text
    task_id = sent.json()["result"]["task"]["id"]
    reads = provider.jwks_reads
    for _ in range(10):
        answer = get_task(url, token, task_id)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text
    assert provider.jwks_reads == reads, "a call with a kept key set read the provider's keys"
    old_key = provider.current
    try:
        provider.rotate(keep_old=False)
        rotated = provider.token("dave", audience=url)
        answer = get_task(url, rotated, task_id)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text
        assert provider.jwks_reads > reads
    finally:
        provider.keys.append(old_key)  # the module's other tests sign with it


# --- scopes, platform-wide issuers ----------------------------------------------------------------


def test_scopes_are_checked_per_operation(deploy, provider, live_platform):
    url, agent = deploy(scopes={"send": ["a2a.send"], "read": ["a2a.read"]})
    reader = provider.token("erin", audience=url, scope="a2a.read")
    both = provider.token("erin", audience=url, scope="a2a.read a2a.send")
    refused = send_with(url, reader)
    assert refused.status_code == 403, refused.text
    challenge = refused.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge and 'scope="a2a.send"' in challenge
    assert refused.json()["error"]["data"][0]["reason"] == "INSUFFICIENT_SCOPE"
    answer = httpx.post(
        f"{url}message:send",
        json={"message": message("hi")},
        headers={"Authorization": f"Bearer {reader}"},
    )
    assert answer.status_code == 403 and answer.json()["error"]["status"] == "PERMISSION_DENIED"
    tenant_value = f"{agent.tenant.slug}/{agent.slug}"
    assert (
        grpc_send(live_platform.grpc_address, tenant_value, reader)
        == grpc.StatusCode.PERMISSION_DENIED
    )
    assert not Task.objects.filter(agent=agent).exists()
    sent = send_with(url, both)
    assert sent.status_code == 200 and "result" in sent.json(), sent.text
    task_id = sent.json()["result"]["task"]["id"]
    assert get_task(url, reader, task_id).json()["result"]["id"] == task_id


def test_a_platform_wide_issuer_is_trusted_at_every_tenant(
    live_platform, make_tenant, make_agent, provider
):
    agent = make_agent(make_tenant(), "echo")
    url = live_platform.agent_url(agent)
    token = provider.token("frank", audience="https://agents.example.com/")
    assert send_with(url, token).status_code == 401
    issuer_create(tenant=None, issuer=provider.issuer, audiences=["https://agents.example.com/"])
    try:
        answer = send_with(url, token)
        for _ in range(40):  # the web process hears of a new issuer within A2A_AUTH_CACHE_SECONDS
            if answer.status_code == 200:
                break
            time.sleep(0.1)
            answer = send_with(url, token)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text
    finally:
        Issuer.objects.filter(tenant=None).delete()


def test_a_deactivated_issuer_stops_its_tokens_within_the_cache_bound(deploy, provider):
    url, agent = deploy()
    token = provider.token("grace", audience=url)
    for _ in range(3):  # verified once, then taken from the process's verified tokens
        answer = send_with(url, token)
        assert answer.status_code == 200 and "result" in answer.json(), answer.text
    Issuer.objects.filter(tenant=agent.tenant).update(is_active=False)
    for _ in range(40):  # A2A_AUTH_CACHE_SECONDS: 1
        answer = send_with(url, token)
        if answer.status_code == 401:
            break
        time.sleep(0.1)
    assert answer.status_code == 401, answer.text
    assert "not accepted by this agent's tenant" in answer.json()["error"]["message"]
