"""How large an A2A message may be, binding by binding, on the live platform: each refuses one
over its limit in its own format, a body in chunks (no Content-Length) included, and takes one
under it, however it compares with the console's smaller limit, which bounds only the console's
and the admin's forms. (JSON-RPC's and REST's 413 for a body with a Content-Length are in
test_jsonrpc_errors.py and test_rest_binding.py; webhook callbacks' in test_webhook_agent.py.)
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from django.conf import settings

from ..conftest import _free_port, start_grpc, stop_process
from .helpers import Target, message, rpc_body

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIMIT = 10 * 1024 * 1024  # A2A_MAX_REQUEST_BYTES and A2A_GRPC_MAX_MESSAGE_BYTES, by default
TIMEOUT = 60


@pytest.fixture
def target(make_target) -> Target:
    return make_target()


def in_chunks(body: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """The body as httpx sends an iterator: Transfer-Encoding: chunked, no Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def padded_send(pad: int) -> dict[str, Any]:
    """A v1.0 SendMessage whose message carries `pad` bytes of metadata."""
    return rpc_body(
        "SendMessage",
        {
            "message": message("hi", metadata={"pad": "p" * pad}),
            "configuration": {"returnImmediately": True},
        },
    )


# --- JSON-RPC and REST -----------------------------------------------------------------------


def test_a_jsonrpc_body_over_the_limit_in_chunks_is_413_in_json_rpcs_envelope(target):
    body = json.dumps(padded_send(LIMIT)).encode()
    headers = {"X-API-Key": target.key, "Content-Type": "application/json", **target.headers}
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(target.url, content=in_chunks(body), headers=headers)
    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == -32600 and f"exceeds {LIMIT} bytes" in error["message"], error


@pytest.mark.parametrize("path", ["message:send", "v1/message:send"])
def test_a_rest_body_over_the_limit_in_chunks_is_413_in_rests_status(target, path):
    body = json.dumps({"message": message("hi", metadata={"pad": "p" * LIMIT})}).encode()
    headers = {"X-API-Key": target.key, "Content-Type": "application/json"}
    with httpx.Client(timeout=TIMEOUT) as http:
        response = http.post(target.url + path, content=in_chunks(body), headers=headers)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == 413 and f"exceeds {LIMIT} bytes" in error["message"], error


def test_messages_over_the_consoles_limit_but_under_the_a2a_limit_are_served(target):
    pad = settings.A2A_CONSOLE_MAX_REQUEST_BYTES + 1024
    headers = {"X-API-Key": target.key, **target.headers}
    with httpx.Client(timeout=TIMEOUT) as http:
        sent = http.post(target.url, json=padded_send(pad), headers=headers)
        assert sent.status_code == 200, sent.text[:500]
        assert sent.json()["result"]["task"]["id"]
        body = {"message": message("hi", metadata={"pad": "p" * pad})}
        rest = http.post(target.url + "message:send", json=body, headers={"X-API-Key": target.key})
        assert rest.status_code == 200, rest.text[:500]


# --- the console's limit on the same web process -------------------------------------------


def test_a_console_form_over_its_limit_in_chunks_gets_the_413_page(live_platform):
    with httpx.Client(timeout=TIMEOUT) as http:
        login = http.get(live_platform.url + "/console/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)[1]
        size = settings.A2A_CONSOLE_MAX_REQUEST_BYTES + 1
        body = f"csrfmiddlewaretoken={token}&password=x&username=".encode() + b"u" * size
        response = http.post(
            live_platform.url + "/console/login/",
            content=in_chunks(body),
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "Referer": live_platform.url + "/console/login/",
            },
        )
    assert response.status_code == 413
    assert "<title>Too large to send · A2A platform</title>" in response.text
    assert f"This request sent {len(body):,} bytes" in response.text
    assert "A2A_CONSOLE_MAX_REQUEST_BYTES" in response.text
    log = (live_platform.log_dir / "daphne.log").read_text()
    assert "POST /console/login/ refused (ConsoleBodyTooBig)" in log


# --- gRPC ----------------------------------------------------------------------------------


@pytest.fixture
def small_sidecar(live_platform: Any, tmp_path: Any) -> Iterator[str]:
    """A second sidecar taking requests of at most 2,000 bytes; its address."""
    address = f"127.0.0.1:{_free_port()}"
    env = {**live_platform.env, "A2A_GRPC_MAX_MESSAGE_BYTES": "2000"}
    proc = start_grpc(address, env, tmp_path / "small-grpc.log")
    try:
        yield address
    finally:
        stop_process(proc)


def _v10_send(text: str, target: Target) -> pb10.SendMessageRequest:
    request = pb10.SendMessageRequest(
        tenant=target.tenant_value,
        message=pb10.Message(
            message_id=str(uuid.uuid4()), role=pb10.Role.ROLE_USER, parts=[pb10.Part(text=text)]
        ),
    )
    request.configuration.return_immediately = True
    return request


def _v03_send(text: str) -> pb03.SendMessageRequest:
    return pb03.SendMessageRequest(
        request=pb03.Message(
            message_id=str(uuid.uuid4()),
            role=pb03.Role.ROLE_USER,
            content=[pb03.Part(text=text)],
        ),
        configuration=pb03.SendMessageConfiguration(blocking=False),
    )


def _refused(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as excinfo:
        call()
    return excinfo.value


def test_grpc_refuses_a_message_over_its_limit_with_resource_exhausted(target, small_sidecar):
    metadata = [("x-api-key", target.key)]
    with grpc.insecure_channel(small_sidecar) as channel:
        v10 = pb10_grpc.A2AServiceStub(channel)
        v03 = pb03_grpc.A2AServiceStub(channel)
        for call in (
            lambda: v10.SendMessage(_v10_send("x" * 3000, target), metadata=metadata, timeout=30),
            lambda: v03.SendMessage(
                _v03_send("x" * 3000),
                metadata=[*metadata, ("a2a-agent", target.tenant_value)],
                timeout=30,
            ),
        ):
            error = _refused(call)
            # gRPC's own answer: the platform never sees the message
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
            assert "larger than max" in error.details() and "2000" in error.details()
        # and the sidecar goes on serving what is within the limit
        task = v10.SendMessage(_v10_send("small", target), metadata=metadata, timeout=30).task
        assert task.id


def test_the_platforms_sidecar_refuses_a_message_over_ten_mib(target, live_platform):
    with grpc.insecure_channel(live_platform.grpc_address) as channel:
        v10 = pb10_grpc.A2AServiceStub(channel)
        error = _refused(
            lambda: v10.SendMessage(
                _v10_send("x" * (LIMIT + 1), target),
                metadata=[("x-api-key", target.key)],
                timeout=TIMEOUT,
            )
        )
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    assert str(LIMIT) in error.details()
