"""What the end-to-end tests share beside the SDK clients (clients.py): the agent under test,
raw JSON-RPC requests and their answers (plain and streamed), message bodies, sends, and waits
(for a condition, and for a task's push deliveries to settle).

A binding's own checks stay with its tests (REST's status bodies in test_rest_binding.py, gRPC's
statuses in test_grpc.py); what two modules would otherwise each write is here, once.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from push_app.models import Delivery
from tasks_app.models import TaskEvent

from .webhook import Received

V1_0_HEADERS = {"A2A-Version": "1.0"}
PUSHED_KINDS = (TaskEvent.Kind.STATUS, TaskEvent.Kind.ARTIFACT)


@dataclass
class Target:
    """An agent under test: its URL (JSON-RPC endpoint and REST root), a key of its tenant, the
    row, and the headers its JSON-RPC calls send unless a call says otherwise (v1.0's)."""

    url: str
    key: str
    agent: Any
    headers: dict[str, str] = field(default_factory=lambda: dict(V1_0_HEADERS))

    @property
    def tenant_value(self) -> str:
        """`<tenant>/<agent>`: a v1.0 request's `tenant`, the gRPC sidecar's routing value."""
        return f"{self.agent.tenant.slug}/{self.agent.slug}"


# --- bodies ------------------------------------------------------------------------------------


def mid(prefix: str = "m") -> str:
    """A message id no other test uses."""
    return f"{prefix}-{uuid.uuid4()}"


def message(text: str = "hi", **fields: Any) -> dict[str, Any]:
    """A v1.0 user message as JSON; `fields` add to it or replace what it has (its messageId)."""
    return {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def rpc_body(method: str, params: Any, request_id: Any = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def raw_send(text: str, *, return_immediately: bool = False, request_id: int = 1) -> dict[str, Any]:
    """A v1.0 SendMessage JSON-RPC request."""
    params: dict[str, Any] = {"message": message(text)}
    if return_immediately:
        params["configuration"] = {"returnImmediately": True}
    return rpc_body("SendMessage", params, request_id)


# --- JSON-RPC ----------------------------------------------------------------------------------


def rpc(
    http: httpx.Client,
    target: Target,
    method: str,
    params: Any,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    url: str | None = None,
    request_id: Any = 1,
) -> httpx.Response:
    """One JSON-RPC call to `target` (its URL, key and version headers unless given)."""
    return http.post(
        url or target.url,
        content=json.dumps(rpc_body(method, params, request_id)).encode(),
        headers={
            "Content-Type": "application/json",
            "X-API-Key": key or target.key,
            **(target.headers if headers is None else headers),
        },
    )


def answer_of(response: httpx.Response, request_id: Any = 1) -> dict[str, Any]:
    """The JSON-RPC answer of a 200 response: a result or an error."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id, body
    return body


def result_of(response: httpx.Response, request_id: Any = 1) -> Any:
    body = answer_of(response, request_id)
    assert "error" not in body, body
    return body["result"]


def error_of(
    response: httpx.Response, code: int, *fragments: str, request_id: Any = 1, status: int = 200
) -> dict[str, Any]:
    """The error of a JSON-RPC answer with this code, whose message holds each fragment."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == request_id, body
    assert "result" not in body, body
    assert body["error"]["code"] == code, body
    for fragment in fragments:
        assert fragment in body["error"]["message"], body
    return body["error"]


def rpc_stream(
    http: httpx.Client,
    target: Target,
    method: str,
    params: Any,
    *,
    headers: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """The JSON-RPC answers of a streaming call (its SSE `data:` lines), as they arrive."""
    body = json.dumps(rpc_body(method, params)).encode()
    sent = {
        "Content-Type": "application/json",
        "X-API-Key": target.key,
        **(target.headers if headers is None else headers),
    }
    with http.stream("POST", target.url, content=body, headers=sent) as response:
        assert response.status_code == 200, response.read().decode()
        assert response.headers["content-type"].startswith("text/event-stream"), response.headers
        for line in response.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])


# --- sends -------------------------------------------------------------------------------------


def rpc_send(http: httpx.Client, target: Target, text: str = "hi", **configuration: Any) -> Any:
    """A v1.0 SendMessage (blocking unless `configuration` says otherwise); its result."""
    params: dict[str, Any] = {"message": message(text)}
    if configuration:
        params["configuration"] = configuration
    return result_of(rpc(http, target, "SendMessage", params, headers=V1_0_HEADERS))


def rpc_send_nonblocking(
    http: httpx.Client, target: Target, text: str, **configuration: Any
) -> str:
    """A v1.0 SendMessage that returns at once; the new task's id."""
    return rpc_send(http, target, text, returnImmediately=True, **configuration)["task"]["id"]


# --- waits -------------------------------------------------------------------------------------


def poll(condition: Callable[[], Any], *, timeout: float, pause: float = 0.1) -> Any:
    """The condition's first truthy value within `timeout` seconds, else its last value."""
    deadline = time.monotonic() + timeout
    while not (value := condition()) and time.monotonic() < deadline:
        time.sleep(pause)
    return value


def wait_until(
    condition: Callable[[], Any], *, timeout: float = 20, what: str = "", pause: float = 0.1
) -> Any:
    """The condition's first truthy value; an AssertionError naming `what` if none comes in
    `timeout` seconds (bounded only so that a broken platform fails instead of hanging)."""
    value = poll(condition, timeout=timeout, pause=pause)
    if not value:
        raise AssertionError(f"timed out waiting for {what or condition}")
    return value


def doorbell_waiters(live_platform: Any) -> float:
    """How many waits on a task's doorbell the platform's daphne has open now."""
    text = httpx.get(f"{live_platform.url}/metrics", timeout=30).text
    return next(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "a2a_doorbell_waiters"
    )


# --- push: what a task's configs hear, and its deliveries ---------------------------------------


def last_seq(task_id: str) -> int:
    return max(TaskEvent.objects.filter(task_id=task_id).values_list("seq", flat=True), default=0)


def pushed_events(task_id: str, after: int = 0) -> list[TaskEvent]:
    """The task's status and artifact events after seq `after`: what a config hears."""
    return list(
        TaskEvent.objects.filter(task_id=task_id, kind__in=PUSHED_KINDS, seq__gt=after).order_by(
            "seq"
        )
    )


def deliveries(task_id: str, config_id: str = "hook") -> list[Delivery]:
    return list(
        Delivery.objects.filter(config__task_id=task_id, config__config_id=config_id).order_by(
            "seq"
        )
    )


def settled(task_id: str, count: int, config_id: str = "hook") -> list[Delivery]:
    """Wait for `count` deliveries of the config, none pending or sending any more."""

    def check() -> list[Delivery] | None:
        rows = deliveries(task_id, config_id)
        done = {Delivery.State.DELIVERED, Delivery.State.DEAD}
        return rows if len(rows) == count and all(d.state in done for d in rows) else None

    return wait_until(check, what=f"{count} settled deliveries of {config_id}")


def bodies(received: list[Received]) -> list[Any]:
    return [r.json() for r in received]
