"""What daphne's HTTP layer refuses before the application sees a request, answered in the REST
binding's format (a `google.rpc.Status` JSON body) on a web process as manage.py runweb starts
it: an over-long URL 414, over-long or too many headers 431, a request that is not HTTP 400,
a multipart body 415; never a reset or a bare status line. Raw sockets, to see the bytes."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ..conftest import ROOT, _free_port, _wait_for_port, stop_process
from .helpers import Target, poll, raw_send, rpc_body

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LIMIT = 16384  # Twisted's: a line, and the request line and headers together


@pytest.fixture(scope="module")
def web(live_platform, tmp_path_factory) -> Iterator[int]:
    """A web tier of its own (manage.py runweb, one daphne) on the live platform's services;
    its port."""
    port = _free_port()
    log = tmp_path_factory.mktemp("limits") / "web.log"
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "runweb", "--port", str(port), "--processes", "1"],
        cwd=ROOT,
        env=live_platform.env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_port(port, proc, log)
        assert poll(lambda: _healthy(port), timeout=90), log.read_text()[-4000:]
        yield port
    finally:
        stop_process(proc)


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
    except httpx.HTTPError:
        return False


def exchange(port: int, request: bytes) -> bytes:
    """Send `request` whole, then read the answer to the end of the connection (the server
    closes it after a refusal, and after an answer to `Connection: close`); a reset on either
    side raises (ConnectionResetError, BrokenPipeError)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def answer(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """Status, headers (lower-case names) and JSON body of one HTTP/1.1 answer."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    assert headers.get("content-type", "").startswith("application/json"), raw[:500]
    assert int(headers["content-length"]) == len(body), raw[:500]
    return int(status_line.split()[1]), headers, json.loads(body)


def status_body(raw: bytes, code: int, reason: str) -> dict[str, Any]:
    """The `google.rpc.Status` body of an answer with this code and ErrorInfo reason."""
    status, headers, body = answer(raw)
    assert status == code, raw[:500]
    assert headers["connection"] == "close"
    error = body["error"]
    assert error["code"] == code and error["status"] == "INVALID_ARGUMENT", body
    assert error["details"][0]["reason"] == reason, body
    assert error["message"], body
    return error


def get(path: str, *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode()


@pytest.fixture
def target(make_target) -> Target:
    return make_target()


@pytest.fixture
def agent_path(target) -> str:
    return "/" + target.url.split("/", 3)[3]


def test_an_over_long_path_is_414(web, agent_path):
    raw = exchange(web, get(agent_path + "tasks/" + "x" * (LIMIT + 100)))
    error = status_body(raw, 414, "URI_TOO_LONG")
    assert "shorter URL" in error["message"]


def test_an_over_long_query_is_414(web, agent_path):
    raw = exchange(web, get(f"{agent_path}tasks/abc?historyLength={'1' * (4 * LIMIT)}"))
    status_body(raw, 414, "URI_TOO_LONG")


def test_an_over_long_header_is_431(web, agent_path):
    raw = exchange(web, get(agent_path, f"X-Padding: {'y' * (LIMIT + 100)}"))
    error = status_body(raw, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert "header line" in error["message"]


def test_headers_over_the_limit_together_are_431(web, agent_path):
    padding = [f"X-Padding-{n}: {'z' * 1000}" for n in range(20)]
    raw = exchange(web, get(agent_path, *padding))
    error = status_body(raw, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert "together" in error["message"]


def test_too_many_headers_are_431(web, agent_path):
    raw = exchange(web, get(agent_path, *(f"X-H{n}: 1" for n in range(600))))
    error = status_body(raw, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE")
    assert "more than 500 headers" in error["message"]


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"NOT HTTP AT ALL\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Name: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: twelve\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
    ids=["request line", "header name", "content length", "chunk size"],
)
def test_what_is_not_http_is_a_400_with_a_body(web, request_bytes):
    error = status_body(exchange(web, request_bytes), 400, "INVALID_REQUEST")
    assert "not valid HTTP/1.1" in error["message"]


def test_a_path_that_is_not_ascii_is_a_400_with_a_body(web, agent_path):
    request = b"GET " + agent_path.encode() + b"caf\xe9 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    status_body(exchange(web, request), 400, "INVALID_REQUEST")


def test_a_header_value_daphne_refuses_is_a_400_with_a_body(web, agent_path):
    raw = exchange(web, get(agent_path, "X-Odd: a\x0bb", "Connection: close"))
    status, _, body = answer(raw)
    assert status == 400, raw
    assert body["error"]["details"][0]["reason"] == "INVALID_REQUEST", body
    assert "control character" in body["error"]["message"], body


@pytest.mark.parametrize("path", ["", "message:send", "v1/message:send"])
@pytest.mark.parametrize("media_type", ["multipart/form-data; boundary=b", "multipart/mixed"])
def test_a_multipart_body_is_415_in_the_bindings_format(web, target, agent_path, path, media_type):
    body = b'--b\r\nContent-Disposition: form-data; name="message"\r\n\r\nhi\r\n--b--\r\n'
    head = (
        f"POST {agent_path}{path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {target.key}\r\n"
        f"Content-Type: {media_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    status, _, answered = answer(exchange(web, head.encode() + body))
    assert status == 415
    if path:  # REST: a Status
        assert answered["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    else:  # JSON-RPC: its error object
        assert answered["error"]["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert "multipart" in json.dumps(answered)


def test_requests_within_the_limits_are_served_as_before(web, target):
    headers = {"X-API-Key": target.key, "A2A-Version": "1.0"}
    url = f"http://127.0.0.1:{web}/" + target.url.split("/", 3)[3]
    with httpx.Client(timeout=60) as http:
        sent = http.post(url, json=raw_send("hi", return_immediately=True), headers=headers)
        assert sent.status_code == 200, sent.text
        task_id = sent.json()["result"]["task"]["id"]
        # A long query and many headers, together just under the limit, on the kept connection.
        padding = {f"X-Padding-{n}": "p" * 100 for n in range(50)}
        get_task = rpc_body("GetTask", {"id": task_id})
        got = http.post(f"{url}?pad={'q' * 9000}", json=get_task, headers=headers | padding)
        assert got.status_code == 200, got.text
        assert got.json()["result"]["id"] == task_id
        got = http.get(f"{url}tasks/{task_id}", headers=headers)
        assert got.status_code == 200 and got.json()["id"] == task_id
