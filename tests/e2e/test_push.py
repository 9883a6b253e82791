"""Push notifications end to end: real daphne + Celery worker + PostgreSQL/Redis deliver a task's
events to a real webhook receiver process (tests/e2e/webhook.py) over real sockets.

What a receiver sees: every status and artifact event once, in the task's order; the config's
token and Authorization; an X-A2A-Signature that verifies against the tenant's JWKS and covers
the exact body. Retries (receiver down, 5xx, 429, Retry-After), permanent failures (4xx, 3xx:
redirects are not followed), the SSRF guard, v0.3 payloads, tenant isolation, agents
without push, and secrets that no answer carries on any binding while every delivery does.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import httpx
import jwt
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.types import a2a_pb2 as pb10
from google.protobuf.json_format import ParseDict

from a2a_platform.ssrf import UnsafeUrl, url_check
from agents.crypto import decrypt
from agents.signing import PushSignatureInvalid, push_signature_verify
from push_app.models import Delivery, DeliveryAttempt, PushConfig
from tasks_app.models import TaskEvent

from .helpers import (
    Target,
    answer_of,
    bodies,
    last_seq,
    message,
    pushed_events,
    result_of,
    rpc,
    settled,
    wait_until,
)
from .webhook import Received, Receiver, answer

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

V10 = {"A2A-Version": "1.0"}
TASK_NOT_FOUND = -32001
PUSH_NOT_SUPPORTED = -32003
INVALID_PARAMS = -32602


# --- helpers ---------------------------------------------------------------------------------


def error_code(answer: dict[str, Any]) -> int:
    assert "error" in answer, answer
    return answer["error"]["code"]


@pytest.fixture
def echo(make_target) -> Target:
    """An echo agent that asks for input on the first turn: a task that waits, idle, for its
    push config, then runs a whole turn (working, artifact, completed) after it."""
    return make_target(config={"input_required": True}, key_name="key")


@pytest.fixture
def receivers(tmp_path) -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(*script: dict[str, Any], default: dict[str, Any] | None = None) -> Receiver:
        receiver = Receiver(directory=tmp_path / "webhooks", script=list(script))
        if default is not None:
            receiver.default = default
        made.append(receiver)
        return receiver

    yield make
    for receiver in made:
        receiver.stop()


def first_turn(http: httpx.Client, agent: Target) -> dict[str, Any]:
    """A task that asks for input: settled, nothing running, nothing pushed yet."""
    task = result_of(rpc(http, agent, "SendMessage", {"message": message("first")}))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


def second_turn(http: httpx.Client, agent: Target, task: dict[str, Any]) -> dict[str, Any]:
    """The follow-up that completes the task (blocking: returns once it is settled)."""
    follow_up = message("second", taskId=task["id"], contextId=task["contextId"])
    done = result_of(rpc(http, agent, "SendMessage", {"message": follow_up}))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    return done


def create_config(
    http: httpx.Client,
    agent: Target,
    task_id: str,
    url: str,
    *,
    config_id: str = "hook",
    token: str = "tok-" + "x" * 8,
    scheme: str = "Bearer",
    credentials: str = "creds-123",
) -> dict[str, Any]:
    params = {
        "taskId": task_id,
        "id": config_id,
        "url": url,
        "token": token,
        "authentication": {"scheme": scheme, "credentials": credentials},
    }
    created = result_of(rpc(http, agent, "CreateTaskPushNotificationConfig", params))
    assert created["url"] == url and created["id"] == config_id, created
    return created


def jwks_of(http: httpx.Client, live_platform, target: Target) -> dict[str, Any]:
    response = http.get(f"{live_platform.url}/a2a/{target.agent.tenant.slug}/.well-known/jwks.json")
    assert response.status_code == 200, response.text
    return response.json()


# --- 1. every event, once, in order ----------------------------------------------------------


def test_every_status_and_artifact_event_arrives_once_in_order(http, echo, receivers):
    receiver = receivers().start()
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], receiver.url + "/hooks/a2a")
    before = last_seq(task["id"])

    second_turn(http, echo, task)

    expected = pushed_events(task["id"], after=before)
    kinds = [e.kind for e in expected]
    assert TaskEvent.Kind.ARTIFACT in kinds and kinds[-1] == TaskEvent.Kind.STATUS, kinds
    assert expected[-1].data["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    received = receiver.wait_for_count(len(expected))
    rows = settled(task["id"], len(expected))

    # Exactly the events, each once, in seq order; nothing from before the config existed.
    assert bodies(received) == [e.data for e in expected]
    assert all(r.method == "POST" and r.path == "/hooks/a2a" for r in received)
    assert all(r.header("Content-Type") == "application/json" for r in received)
    assert [d.seq for d in rows] == [e.seq for e in expected]
    assert [d.event_id for d in rows] == [e.pk for e in expected]
    for delivery in rows:
        assert delivery.state == Delivery.State.DELIVERED, delivery
        assert delivery.attempts == 1 and delivery.last_status_code == 200
        assert delivery.delivered_at is not None
        attempts = list(DeliveryAttempt.objects.filter(delivery=delivery))
        assert len(attempts) == 1, attempts
        assert attempts[0].status_code == 200 and attempts[0].outcome == "delivered"
        assert attempts[0].latency_ms is not None and attempts[0].latency_ms >= 0
    # A second look finds nothing more: exactly once.
    assert len(receiver.requests()) == len(expected)


def test_an_inline_config_on_send_hears_the_task_from_its_first_event(http, echo, receivers):
    receiver = receivers().start()
    params = {
        "message": message("first"),
        "configuration": {
            "taskPushNotificationConfig": {"id": "hook", "url": receiver.url, "token": "t0"}
        },
    }
    task = result_of(rpc(http, echo, "SendMessage", params))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task

    expected = pushed_events(task["id"])
    received = receiver.wait_for_count(len(expected))
    settled(task["id"], len(expected))
    assert bodies(received) == [e.data for e in expected]
    assert expected[-1].data["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert all(r.header("X-A2A-Notification-Token") == "t0" for r in received)
    listed = result_of(rpc(http, echo, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))
    assert [c["id"] for c in listed["configs"]] == ["hook"]


# --- 2. who sent it: token, Authorization, signature ------------------------------------------


def test_each_request_carries_the_token_authorization_and_a_verifiable_signature(
    http, live_platform, echo, receivers, make_tenant
):
    receiver = receivers().start()
    task = first_turn(http, echo)
    create_config(
        http, echo, task["id"], receiver.url, token="the-token", scheme="Bearer", credentials="c1"
    )
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)
    received = receiver.wait_for_count(len(expected))
    jwks = jwks_of(http, live_platform, echo)
    another_task = str(uuid.uuid4())

    jtis = set()
    for request in received:
        assert request.header("X-A2A-Notification-Token") == "the-token"
        assert request.header("Authorization") == "Bearer c1"
        token = request.header("X-A2A-Signature")
        assert token, request.headers
        header = jwt.get_unverified_header(token)
        assert header["alg"] == "ES256" and header["kid"] in {k["kid"] for k in jwks["keys"]}

        claims = push_signature_verify(
            token, request.body, jwks, task_id=task["id"], issuer=live_platform.url
        )
        assert claims["body_sha256"] == hashlib.sha256(request.body).hexdigest()
        assert claims["task_id"] == task["id"]
        assert claims["exp"] - claims["iat"] == 300
        jtis.add(claims["jti"])

        # The body is the event as signed: change one byte and the signature no longer covers it.
        tampered = request.body.replace(b'"TASK_STATE_', b'"TASK_STATE_X', 1)
        if tampered == request.body:
            tampered = request.body[:-1] + b" }"
        with pytest.raises(PushSignatureInvalid, match="does not cover this body"):
            push_signature_verify(token, tampered, jwks, task_id=task["id"])
        with pytest.raises(PushSignatureInvalid, match="another task"):
            push_signature_verify(token, request.body, jwks, task_id=another_task)
    assert len(jtis) == len(received), "every request has a jti of its own"
    # Another tenant's JWKS does not vouch for my tenant's signatures.
    stranger = make_tenant()
    response = http.get(f"{live_platform.url}/a2a/{stranger.slug}/.well-known/jwks.json")
    assert response.status_code == 200, response.text
    with pytest.raises(PushSignatureInvalid, match="kid"):
        push_signature_verify(
            received[0].header("X-A2A-Signature"), received[0].body, response.json()
        )

    # What docs/push-verification.md tells receivers to do, with PyJWT and nothing else.
    client = jwt.PyJWKClient(
        f"{live_platform.url}/a2a/{echo.agent.tenant.slug}/.well-known/jwks.json"
    )
    for request in received:
        token = request.header("X-A2A-Signature")
        key = client.get_signing_key_from_jwt(token)
        claims = jwt.decode(
            token,
            key.key,
            algorithms=["ES256"],
            issuer=live_platform.url,
            leeway=30,
            options={"require": ["iss", "iat", "exp", "jti", "task_id", "body_sha256"]},
        )
        assert claims["body_sha256"] == hashlib.sha256(request.body).hexdigest()
        assert claims["task_id"] == task["id"] == request.json()[_payload_key(request)]["taskId"]
        assert hashlib.sha256(request.body + b"\n").hexdigest() != claims["body_sha256"]


def _payload_key(request: Received) -> str:
    (key,) = request.json().keys()
    return key


# --- 3. the receiver is down, then up ---------------------------------------------------------


def test_a_receiver_that_was_down_gets_every_event_in_order_once_it_is_up(http, echo, receivers):
    receiver = receivers()  # its port is chosen, nothing listens on it yet
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], receiver.url)
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)

    # The first delivery fails (connection refused) and is retried; the later ones wait behind it.
    failed = wait_until(
        lambda: list(
            DeliveryAttempt.objects.filter(delivery__config__task_id=task["id"], outcome="retry")
        ),
        what="a failed attempt",
    )
    assert failed[0].status_code is None and failed[0].error, failed[0].__dict__
    attempted_seqs = set(
        DeliveryAttempt.objects.filter(delivery__config__task_id=task["id"]).values_list(
            "delivery__seq", flat=True
        )
    )
    assert attempted_seqs == {expected[0].seq}, "later events must wait for the first"

    receiver.start()
    received = receiver.wait_for_count(len(expected))
    rows = settled(task["id"], len(expected))

    assert bodies(received) == [e.data for e in expected]
    assert all(d.state == Delivery.State.DELIVERED for d in rows), rows
    assert rows[0].attempts >= 2 and rows[0].last_status_code == 200
    head_log = list(DeliveryAttempt.objects.filter(delivery=rows[0]))
    assert [a.outcome for a in head_log[:-1]] == ["retry"] * (len(head_log) - 1)
    assert head_log[-1].outcome == "delivered" and head_log[-1].status_code == 200
    assert len(receiver.requests()) == len(expected)


def test_a_receiver_that_goes_down_mid_task_gets_the_rest_once_it_is_back(http, echo, receivers):
    receiver = receivers().start()
    params = {
        "message": message("first"),
        "configuration": {"taskPushNotificationConfig": {"id": "hook", "url": receiver.url}},
    }
    task = result_of(rpc(http, echo, "SendMessage", params))["task"]
    first = pushed_events(task["id"])
    receiver.wait_for_count(len(first))
    settled(task["id"], len(first))
    receiver.stop()

    second_turn(http, echo, task)
    everything = pushed_events(task["id"])
    assert len(everything) > len(first)
    wait_until(
        lambda: DeliveryAttempt.objects.filter(
            delivery__config__task_id=task["id"], outcome="retry"
        ).exists(),
        what="a failed attempt while the receiver is down",
    )
    receiver.start()  # the same port again
    received = receiver.wait_for_count(len(everything))
    rows = settled(task["id"], len(everything))

    assert bodies(received) == [e.data for e in everything]
    assert all(d.state == Delivery.State.DELIVERED for d in rows), rows


# --- 4. permanent and retryable answers -------------------------------------------------------


def test_a_permanent_4xx_is_not_retried(http, echo, receivers):
    receiver = receivers(answer(403)).start()  # the first request is refused, the rest are 200
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], receiver.url)
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)

    rows = settled(task["id"], len(expected))
    received = receiver.wait_for_count(len(expected))

    head = rows[0]
    assert head.state == Delivery.State.DEAD, head
    assert head.attempts == 1 and head.last_status_code == 403
    assert "403" in head.last_error
    (attempt,) = DeliveryAttempt.objects.filter(delivery=head)
    assert attempt.status_code == 403 and attempt.outcome == "dead"
    # The receiver saw the refused event once: it was not sent again.
    assert [r.answered for r in received] == [403] + [200] * (len(expected) - 1)
    assert bodies(received) == [e.data for e in expected]
    # The dead letter waits for an operator; the events after it were delivered.
    assert all(d.state == Delivery.State.DELIVERED for d in rows[1:]), rows


@pytest.mark.parametrize(
    "refusal",
    [answer(503, retry_after="1"), answer(429), answer(500), answer(408)],
    ids=["503-retry-after", "429", "500", "408"],
)
def test_a_retryable_answer_is_retried_until_delivered(http, echo, receivers, refusal):
    receiver = receivers(refusal).start()
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], receiver.url)
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)

    rows = settled(task["id"], len(expected))
    received = receiver.wait_for_count(len(expected) + 1)

    assert all(d.state == Delivery.State.DELIVERED for d in rows), rows
    head = rows[0]
    assert head.attempts == 2 and head.last_status_code == 200
    first, second = DeliveryAttempt.objects.filter(delivery=head)
    assert (first.status_code, first.outcome) == (refusal["status"], "retry")
    assert (second.status_code, second.outcome) == (200, "delivered")
    if "Retry-After" in refusal["headers"]:
        # Never sooner than the receiver asked (a lower bound the platform guarantees).
        assert (second.started_at - first.started_at).total_seconds() >= 0.95
    # The refused event came again, then the rest, in order; each delivered once.
    assert [r.answered for r in received] == [refusal["status"]] + [200] * len(expected)
    assert bodies(received) == [expected[0].data] + [e.data for e in expected]
    assert all(DeliveryAttempt.objects.filter(delivery=d).count() == 1 for d in rows[1:]), (
        "only the refused delivery is attempted twice"
    )


# --- 5. SSRF ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/hook", "loopback"),
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[::1]/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://[::ffff:10.0.0.1]/hook", "private"),
        ("http://0.0.0.0/hook", "unspecified"),
    ],
)
def test_the_production_guard_refuses_internal_addresses(settings, url, reason):
    settings.A2A_PUSH_ALLOWED_NETWORKS = []
    settings.A2A_PUSH_ALLOWED_HOSTS = []
    with pytest.raises(UnsafeUrl) as refused:
        url_check(url)
    assert reason in refused.value.reason


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.0.0.1/hook", "private address"),
        ("http://169.254.169.254/latest", "cloud metadata address"),
        ("ftp://127.0.0.1/hook", "scheme"),
        ("http://user:pw@127.0.0.1/hook", "user name or password"),
    ],
)
def test_creating_a_config_for_an_internal_url_is_refused(http, echo, url, reason):
    task = first_turn(http, echo)
    answered = answer_of(
        rpc(
            http,
            echo,
            "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": "x", "url": url},
        )
    )
    assert error_code(answered) == INVALID_PARAMS, answered
    assert "refused" in answered["error"]["message"] and reason in answered["error"]["message"]
    assert not PushConfig.objects.filter(task_id=task["id"]).exists()


@pytest.mark.parametrize("location", ["http://10.0.0.1/", "{self}/followed"])
def test_a_redirect_is_not_followed(http, echo, receivers, location):
    receiver = receivers()
    receiver.default = answer(302, Location=location.format(self=receiver.url))
    receiver.start()
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], receiver.url + "/hook")
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)

    rows = settled(task["id"], len(expected))
    received = receiver.wait_for_count(len(expected))

    for delivery in rows:
        assert delivery.state == Delivery.State.DEAD, delivery
        assert delivery.attempts == 1 and delivery.last_status_code == 302
    assert [r.path for r in receiver.requests()] == ["/hook"] * len(expected), "never followed"
    assert bodies(received) == [e.data for e in expected]


# --- 6. v0.3 configs get v0.3 payloads ---------------------------------------------------------


def test_a_v03_config_receives_v03_events(http, live_platform, echo, receivers):
    receiver = receivers().start()
    task = first_turn(http, echo)
    params = {
        "taskId": task["id"],
        "pushNotificationConfig": {
            "id": "hook",
            "url": receiver.url + "/v03",
            "token": "tok03",
            "authentication": {"schemes": ["Bearer"], "credentials": "cred03"},
        },
    }
    created = result_of(rpc(http, echo, "tasks/pushNotificationConfig/set", params, headers={}))
    assert created["taskId"] == task["id"]
    assert created["pushNotificationConfig"]["url"] == receiver.url + "/v03"
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)
    received = receiver.wait_for_count(len(expected))
    settled(task["id"], len(expected))

    events = bodies(received)
    kinds = {TaskEvent.Kind.STATUS: "status-update", TaskEvent.Kind.ARTIFACT: "artifact-update"}
    assert [e["kind"] for e in events] == [kinds[e.kind] for e in expected]
    for event in events:
        assert event["taskId"] == task["id"] and event["contextId"] == task["contextId"]
    statuses = [e for e in events if e["kind"] == "status-update"]
    assert [e["status"]["state"] for e in statuses] == ["working", "completed"], statuses
    assert [e["final"] for e in statuses] == [False, True], "v0.3 marks the terminal event final"
    (artifact,) = [e["artifact"] for e in events if e["kind"] == "artifact-update"]
    assert artifact["parts"][0]["kind"] == "text" and "second" in artifact["parts"][0]["text"]
    jwks = jwks_of(http, live_platform, echo)
    for request in received:
        assert request.path == "/v03"
        assert request.header("X-A2A-Notification-Token") == "tok03"
        assert request.header("Authorization") == "Bearer cred03"
        push_signature_verify(
            request.header("X-A2A-Signature"), request.body, jwks, task_id=task["id"]
        )


def test_an_inline_config_sent_over_v03_receives_v03_events(http, echo, receivers):
    receiver = receivers().start()
    params = {
        "message": {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": "first"}],
        },
        "configuration": {"pushNotificationConfig": {"url": receiver.url, "token": "t03"}},
    }
    task = result_of(rpc(http, echo, "message/send", params, headers={}))
    assert task["kind"] == "task" and task["status"]["state"] == "input-required", task

    expected = pushed_events(task["id"])
    received = receiver.wait_for_count(len(expected))
    settled(
        task["id"], len(expected), config_id=PushConfig.objects.get(task_id=task["id"]).config_id
    )
    events = bodies(received)
    kinds = {TaskEvent.Kind.STATUS: "status-update", TaskEvent.Kind.ARTIFACT: "artifact-update"}
    assert [e.get("kind") for e in events] == [kinds[e.kind] for e in expected], events
    assert events[-1]["status"]["state"] == "input-required"
    assert all(r.header("X-A2A-Notification-Token") == "t03" for r in received)
    listed = result_of(
        rpc(http, echo, "tasks/pushNotificationConfig/list", {"id": task["id"]}, headers={})
    )
    assert [c["pushNotificationConfig"]["url"] for c in listed] == [receiver.url]


# --- 7. tenant isolation, and agents without push -------------------------------------------


def test_another_tenants_key_cannot_reach_my_tasks_push_configs(
    http, live_platform, echo, make_tenant, make_agent, make_key
):
    task = first_turn(http, echo)
    create_config(http, echo, task["id"], "http://127.0.0.1:9/hook")
    other_tenant = make_tenant()
    other_row = make_agent(other_tenant, "echo")
    other = Target(live_platform.agent_url(other_row), make_key(other_tenant), other_row)
    config = {"taskId": task["id"], "id": "hook", "url": "http://127.0.0.1:9/evil"}

    calls = [
        ("CreateTaskPushNotificationConfig", config),
        ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook"}),
    ]
    for method, params in calls:
        assert error_code(answer_of(rpc(http, other, method, params))) == TASK_NOT_FOUND, method
    # The v0.3 methods too.
    v03_calls = [
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": task["id"], "pushNotificationConfig": {"url": config["url"]}},
        ),
        (
            "tasks/pushNotificationConfig/get",
            {"id": task["id"], "pushNotificationConfigId": "hook"},
        ),
        ("tasks/pushNotificationConfig/list", {"id": task["id"]}),
        (
            "tasks/pushNotificationConfig/delete",
            {"id": task["id"], "pushNotificationConfigId": "hook"},
        ),
    ]
    for method, params in v03_calls:
        assert (
            error_code(answer_of(rpc(http, other, method, params, headers={}))) == TASK_NOT_FOUND
        ), method
    # Its key on my agent's URL is no key at all.
    refused = http.post(
        echo.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "ListTaskPushNotificationConfigs",
              "params": {"taskId": task["id"]}},
        headers={"X-API-Key": other.key, **V10},
    )  # fmt: skip
    assert refused.status_code == 401
    # My config is untouched.
    (mine,) = PushConfig.objects.filter(task_id=task["id"])
    assert (mine.config_id, mine.url) == ("hook", "http://127.0.0.1:9/hook")
    got = result_of(
        rpc(http, echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook"})
    )
    assert got["url"] == "http://127.0.0.1:9/hook"


def test_an_agent_without_push_says_so_and_refuses_configs(http, live_platform, echo, make_agent):
    row = make_agent(echo.agent.tenant, "nopush", push_notifications=False)
    nopush = Target(live_platform.agent_url(row), echo.key, row)
    task = result_of(rpc(http, nopush, "SendMessage", {"message": message("hi")}))["task"]
    url = "http://127.0.0.1:9/hook"

    calls = [
        ("CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "h", "url": url}),
        ("GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "h"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "h"}),
    ]
    for method, params in calls:
        assert error_code(answer_of(rpc(http, nopush, method, params))) == PUSH_NOT_SUPPORTED, (
            method
        )
    v03_set = {"taskId": task["id"], "pushNotificationConfig": {"url": url}}
    answered = answer_of(rpc(http, nopush, "tasks/pushNotificationConfig/set", v03_set, headers={}))
    assert error_code(answered) == PUSH_NOT_SUPPORTED
    inline = {
        "message": message("hi"),
        "configuration": {"taskPushNotificationConfig": {"url": url}},
    }
    assert error_code(answer_of(rpc(http, nopush, "SendMessage", inline))) == PUSH_NOT_SUPPORTED
    assert not PushConfig.objects.filter(task__agent=row).exists()

    def capabilities(agent: Target) -> dict[str, Any]:
        response = http.get(agent.url + ".well-known/agent-card.json")
        assert response.status_code == 200, response.text
        return response.json()["capabilities"]

    assert capabilities(nopush).get("pushNotifications", False) is False
    assert capabilities(echo)["pushNotifications"] is True


def test_config_crud_round_trip(http, echo):
    task = first_turn(http, echo)
    url = "http://127.0.0.1:9/a"
    token, credentials = "token-of-config-a", "credentials-of-config-a"
    create_config(http, echo, task["id"], url, config_id="a", token=token, credentials=credentials)
    create_config(http, echo, task["id"], url + "b", config_id="b")
    got = result_of(
        rpc(http, echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "a"})
    )
    # Without its token and credentials: they are write-only.
    assert got == {
        "id": "a",
        "taskId": task["id"],
        "url": url,
        "authentication": {"scheme": "Bearer"},
    }
    listed = result_of(rpc(http, echo, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))
    assert [c["id"] for c in listed["configs"]] == ["a", "b"]
    assert listed["configs"][0] == got
    # Secrets are encrypted at rest (long enough not to occur in the ciphertext's base64 by chance).
    stored = PushConfig.objects.get(task_id=task["id"], config_id="a")
    assert token not in stored.token_encrypted and decrypt(stored.token_encrypted) == token
    assert credentials not in stored.auth_credentials_encrypted
    assert decrypt(stored.auth_credentials_encrypted) == credentials
    assert (
        result_of(
            rpc(http, echo, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "a"})
        )
        == {}
    )
    answered = answer_of(
        rpc(http, echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "a"})
    )
    assert error_code(answered) == TASK_NOT_FOUND
    listed = result_of(rpc(http, echo, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}))
    assert [c["id"] for c in listed["configs"]] == ["b"]


# --- v0.1 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["dashed", "hex"])
def test_a_v01_config_receives_v01_events_with_its_headers(http, echo, receivers, spelling):
    """Each event carries the task id as the client wrote it (v0.1 clients often send
    `uuid4().hex`)."""
    receiver = receivers().start()
    v01 = {"A2A-Version": "0.1"}
    task_id = uuid.uuid4().hex if spelling == "hex" else str(uuid.uuid4())
    send = {"id": task_id, "message": {"role": "user", "parts": [{"type": "text", "text": "a"}]}}
    task = result_of(rpc(http, echo, "tasks/send", send, headers=v01))
    assert task["status"]["state"] == "input-required", task
    config = {"id": task_id, "url": receiver.url, "headers": {"X-Hook-Secret": "v01"}}
    assert (
        result_of(rpc(http, echo, "tasks/pushNotification/set", config, headers=v01))["url"]
        == receiver.url
    )
    after = last_seq(task_id)
    follow_up = {
        "id": task_id,
        "message": {"role": "user", "parts": [{"type": "text", "text": "b"}]},
    }
    assert (
        result_of(rpc(http, echo, "tasks/send", follow_up, headers=v01))["status"]["state"]
        == "completed"
    )

    expected = pushed_events(task_id, after)
    received = receiver.wait_for_count(len(expected))
    settled(task_id, len(expected), config_id="v0.1")
    events = bodies(received)
    # v0.1 events: a status update with `final`, or an artifact with its `index`; no `kind`
    assert all("kind" not in e and e["id"] == task_id for e in events), events
    assert events[-1]["status"]["state"] == "completed" and events[-1]["final"] is True
    assert any("artifact" in e and e["artifact"]["index"] == 0 for e in events), events
    assert all(r.header("X-Hook-Secret") == "v01" for r in received)
    assert all(r.header("X-A2A-Signature") for r in received)


def test_a_v01_method_sent_without_a_version_header_makes_a_v01_config(http, echo):
    task_id = str(uuid.uuid4())
    send = {"id": task_id, "message": {"role": "user", "parts": [{"type": "text", "text": "a"}]}}
    result_of(rpc(http, echo, "tasks/send", send, headers={"A2A-Version": "0.1"}))
    hook = "http://127.0.0.1:9/hook"
    result_of(
        rpc(http, echo, "tasks/pushNotification/set", {"id": task_id, "url": hook}, headers={})
    )
    assert PushConfig.objects.get(task_id=task_id).dialect == "0.1"  # deliveries in v0.1 shape


def test_v10_get_needs_the_config_id(http, echo):
    task = first_turn(http, echo)
    answer = answer_of(rpc(http, echo, "GetTaskPushNotificationConfig", {"taskId": task["id"]}))
    assert error_code(answer) == -32602 and "'id'" in answer["error"]["message"]


# --- 8. secrets are write-only -------------------------------------------------------------------


@dataclass(frozen=True)
class Secrets:
    """Strings that occur nowhere but in the config they were given to."""

    token: str = field(default_factory=lambda: f"token-{uuid.uuid4().hex}")
    credentials: str = field(default_factory=lambda: f"credentials-{uuid.uuid4().hex}")
    # v0.1's configs carry free-form headers instead: one of this name carries the token
    header: str = field(default_factory=lambda: f"X-Hook-{uuid.uuid4().hex[:12]}")

    def leaked_in(self, answer: bytes) -> list[str]:
        return [s for s in (self.token, self.credentials, self.header) if s.encode() in answer]


@dataclass(frozen=True)
class Writer:
    """Where one binding and version creates, gets and lists a config of a task."""

    http: httpx.Client
    channel: grpc.Channel
    echo: Target
    task_id: str
    url: str
    secrets: Secrets

    def config10(self) -> dict[str, Any]:
        return {
            "id": "hook",
            "url": self.url,
            "token": self.secrets.token,
            "authentication": {"scheme": "Bearer", "credentials": self.secrets.credentials},
        }

    def config03(self) -> dict[str, Any]:
        return {
            "id": "hook",
            "url": self.url,
            "token": self.secrets.token,
            "authentication": {"schemes": ["Bearer"], "credentials": self.secrets.credentials},
        }

    def rpc(self, method: str, params: dict[str, Any], version: str) -> bytes:
        response = rpc(self.http, self.echo, method, params, headers={"A2A-Version": version})
        return _ok(response)

    def rest(self, root: str, body: dict[str, Any]) -> list[bytes]:
        configs = f"{self.echo.url}{root}tasks/{self.task_id}/pushNotificationConfigs"
        key = {"X-API-Key": self.echo.key}
        return [
            _ok(self.http.post(configs, json=body, headers=key)),
            _ok(self.http.get(f"{configs}/hook", headers=key)),
            _ok(self.http.get(configs, headers=key)),
        ]

    def grpc(self, service: str, method: str, request: Any) -> bytes:
        """The answer's bytes as they came on the wire, not a message parsed from them."""
        call = self.channel.unary_unary(
            f"/{service}/{method}",
            request_serializer=lambda message: message.SerializeToString(),
            response_deserializer=None,
        )
        metadata = [("x-api-key", self.echo.key)]
        if service == V03_GRPC:
            metadata.append(("a2a-agent", self.echo.tenant_value))
        return call(request, metadata=metadata, timeout=30)


def _ok(response: httpx.Response) -> bytes:
    assert response.status_code == 200, response.text
    assert not (isinstance(body := response.json(), dict) and "error" in body), body
    return response.content


V10_GRPC, V03_GRPC = "lf.a2a.v1.A2AService", "a2a.v1.A2AService"


def _jsonrpc10(w: Writer) -> list[bytes]:
    return [
        w.rpc("CreateTaskPushNotificationConfig", {"taskId": w.task_id, **w.config10()}, "1.0"),
        w.rpc("GetTaskPushNotificationConfig", {"taskId": w.task_id, "id": "hook"}, "1.0"),
        w.rpc("ListTaskPushNotificationConfigs", {"taskId": w.task_id}, "1.0"),
    ]


def _jsonrpc03(w: Writer) -> list[bytes]:
    method = "tasks/pushNotificationConfig/"
    config = {"taskId": w.task_id, "pushNotificationConfig": w.config03()}
    return [
        w.rpc(method + "set", config, "0.3"),
        w.rpc(method + "get", {"id": w.task_id, "pushNotificationConfigId": "hook"}, "0.3"),
        w.rpc(method + "list", {"id": w.task_id}, "0.3"),
    ]


def _jsonrpc01(w: Writer) -> list[bytes]:
    headers = {
        w.secrets.header: w.secrets.token,
        "Authorization": f"Bearer {w.secrets.credentials}",
    }
    config = {"id": w.task_id, "url": w.url, "headers": headers}
    return [  # v0.1 has no list
        w.rpc("tasks/pushNotification/set", config, "0.1"),
        w.rpc("tasks/pushNotification/get", {"id": w.task_id}, "0.1"),
    ]


def _rest10(w: Writer) -> list[bytes]:
    return w.rest("", w.config10())


def _rest03(w: Writer) -> list[bytes]:
    parent = f"tasks/{w.task_id}"
    body = {
        "parent": parent,
        "configId": "hook",
        "config": {"pushNotificationConfig": w.config03()},
    }
    return w.rest("v1/", body)


def _grpc10(w: Writer) -> list[bytes]:
    tenant, task_id = w.echo.tenant_value, w.task_id
    config = ParseDict(
        w.config10(), pb10.TaskPushNotificationConfig(tenant=tenant, task_id=task_id)
    )
    get = pb10.GetTaskPushNotificationConfigRequest(tenant=tenant, task_id=task_id, id="hook")
    listing = pb10.ListTaskPushNotificationConfigsRequest(tenant=tenant, task_id=task_id)
    return [
        w.grpc(V10_GRPC, "CreateTaskPushNotificationConfig", config),
        w.grpc(V10_GRPC, "GetTaskPushNotificationConfig", get),
        w.grpc(V10_GRPC, "ListTaskPushNotificationConfigs", listing),
    ]


def _grpc03(w: Writer) -> list[bytes]:
    parent = f"tasks/{w.task_id}"
    config = ParseDict({"pushNotificationConfig": w.config03()}, pb03.TaskPushNotificationConfig())
    create = pb03.CreateTaskPushNotificationConfigRequest(
        parent=parent, config_id="hook", config=config
    )
    get = pb03.GetTaskPushNotificationConfigRequest(name=f"{parent}/pushNotificationConfigs/hook")
    listing = pb03.ListTaskPushNotificationConfigRequest(parent=parent)
    return [
        w.grpc(V03_GRPC, "CreateTaskPushNotificationConfig", create),
        w.grpc(V03_GRPC, "GetTaskPushNotificationConfig", get),
        w.grpc(V03_GRPC, "ListTaskPushNotificationConfig", listing),
    ]


WRITE_THEN_READ: dict[str, Callable[[Writer], list[bytes]]] = {
    "jsonrpc-1.0": _jsonrpc10,
    "jsonrpc-0.3": _jsonrpc03,
    "jsonrpc-0.1": _jsonrpc01,
    "rest-1.0": _rest10,
    "rest-0.3": _rest03,
    "grpc-1.0": _grpc10,
    "grpc-0.3": _grpc03,
}


@pytest.fixture
def channel(live_platform) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(live_platform.grpc_address) as ch:
        yield ch


@pytest.mark.parametrize("case", list(WRITE_THEN_READ))
def test_no_answer_carries_a_configs_secrets_but_every_delivery_does(
    http, channel, echo, receivers, case
):
    """The create's answer, a get and a list, on every binding and version, hold neither the
    token nor the credentials (v0.1: neither a header's name nor its value), byte for byte;
    the receiver still gets them with each notification."""
    receiver = receivers().start()
    task = first_turn(http, echo)
    secrets = Secrets()
    writer = Writer(http, channel, echo, task["id"], receiver.url, secrets)

    answers = WRITE_THEN_READ[case](writer)

    for raw in answers:
        assert receiver.url.encode() in raw, raw  # the config, read back
        assert not secrets.leaked_in(raw), (secrets.leaked_in(raw), raw)
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)
    received = receiver.wait_for_count(len(expected))
    settled(task["id"], len(expected), config_id="v0.1" if case == "jsonrpc-0.1" else "hook")
    token_header = secrets.header if case == "jsonrpc-0.1" else "X-A2A-Notification-Token"
    for request in received:
        assert request.header(token_header) == secrets.token
        assert request.header("Authorization") == f"Bearer {secrets.credentials}"


def test_a_config_set_back_as_it_was_read_has_no_secrets_left(http, echo, receivers):
    """Set replaces the whole config: a client that sets back what it read, without the
    secrets, removes them (docs/decisions.md, "Write-only push secrets"). Sending them again
    puts them back."""
    receiver = receivers().start()
    task = first_turn(http, echo)
    secrets = Secrets()
    create_config(
        http, echo, task["id"], receiver.url, token=secrets.token, credentials=secrets.credentials
    )
    read = result_of(
        rpc(http, echo, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook"})
    )
    assert read == {
        "id": "hook",
        "taskId": task["id"],
        "url": receiver.url,
        "authentication": {"scheme": "Bearer"},
    }

    # when the client sets it back as it read it
    result_of(rpc(http, echo, "CreateTaskPushNotificationConfig", read))

    # then no token and no credentials are left to send
    stored = PushConfig.objects.get(task_id=task["id"], config_id="hook")
    assert (stored.token_encrypted, stored.auth_credentials_encrypted) == ("", "")
    before = last_seq(task["id"])
    second_turn(http, echo, task)
    expected = pushed_events(task["id"], after=before)
    received = receiver.wait_for_count(len(expected))
    settled(task["id"], len(expected))
    assert all(r.header("X-A2A-Notification-Token") is None for r in received)
    assert all(r.header("Authorization") == "Bearer" for r in received)
    # and a set that gives them again has them again
    create_config(http, echo, task["id"], receiver.url, token=secrets.token, credentials="c2")
    stored.refresh_from_db()
    assert decrypt(stored.token_encrypted) == secrets.token
    assert decrypt(stored.auth_credentials_encrypted) == "c2"
