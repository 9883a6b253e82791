"""The requests the fuzzer sends, exactly as sent, and what came back.

HTTP requests are written to the socket byte for byte: an HTTP client library refuses (or
repairs) much of what a fuzzer must send, and the reproducer has to be the exact request. The
answer is read with the standard library's `http.client.HTTPResponse`, which parses any
response from a socket. gRPC calls go through grpcio with the request as bytes (no serializer),
so bytes that are not the method's message reach the server as they are.
"""

from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass, field
from typing import Any

import grpc

# An SSE answer is read for this long at most: a subscription to a task that is still
# running stays open, which is no fault; what was read by then is judged.
STREAM_READ_SECONDS = 5.0
# An answer's body is kept up to this size (the rest is read and counted, not kept): far
# above any answer the platform gives (a page of 100 tasks with their history included).
KEEP_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class HttpCase:
    """One HTTP request: the binding it is aimed at, how it was made, and its bytes."""

    binding: str  # "jsonrpc", "rest", or "any" (either form fits the request)
    dialect: str  # "1.0", "0.3", "0.1", or "" when it names none it could speak
    what: str  # how the case was made, e.g. "v1.0 SendMessage: params.message: removed"
    method: str
    target: bytes  # the path and query, as they go on the request line
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: bytes = b""

    def head(self, host: str) -> list[bytes]:
        """The request line and header lines: Host unless the case sets its own,
        Content-Length unless it frames the body itself, Connection: close."""
        names = {name.lower() for name, _ in self.headers}
        lines = [self.method.encode("latin-1") + b" " + self.target + b" HTTP/1.1"]
        if b"host" not in names:
            lines.append(b"Host: " + host.encode())
        lines += [name + b": " + value for name, value in self.headers]
        if not names & {b"content-length", b"transfer-encoding"} and (
            self.body or self.method in ("POST", "PUT", "PATCH")
        ):
            lines.append(b"Content-Length: " + str(len(self.body)).encode())
        lines.append(b"Connection: close")
        return lines

    def raw(self, host: str) -> bytes:
        """The request's bytes, as sent."""
        return b"\r\n".join(self.head(host)) + b"\r\n\r\n" + self.body


@dataclass
class HttpAnswer:
    status: int | None = None
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    body_size: int = 0
    # Transport failures: a reset, a close without an answer, no answer in time.
    failure: str = ""
    seconds: float = 0.0
    stream_cut: bool = False  # an SSE answer still open when reading stopped

    def header(self, name: str) -> str:
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), "")


def send_http(case: HttpCase, host: str, port: int, timeout: float) -> HttpAnswer:
    """Send the case on a new connection and read its answer, within `timeout` seconds
    (an SSE answer is read for STREAM_READ_SECONDS at most)."""
    answer = HttpAnswer()
    started = time.monotonic()
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        answer.failure = f"cannot connect: {exc}"
        return answer
    try:
        send_error = ""
        try:
            sock.sendall(case.raw(f"{host}:{port}"))
        except OSError as exc:
            # The server may answer (413, 414) and close before reading a large request:
            # its answer is still to be read.
            send_error = f"{type(exc).__name__} while sending"
        response = http.client.HTTPResponse(sock, method=case.method)
        try:
            response.begin()
        except TimeoutError:
            answer.failure = f"no answer within {timeout:.0f} s"
            return answer
        except (http.client.HTTPException, OSError) as exc:
            answer.failure = send_error or f"{type(exc).__name__}: {exc}"
            return answer
        answer.status, answer.reason = response.status, response.reason
        answer.headers = list(response.getheaders())
        try:
            if "text/event-stream" in (response.getheader("Content-Type") or ""):
                until = started + min(timeout, STREAM_READ_SECONDS)
                _read_stream(response, answer, sock, until)
            else:
                _read_body(response, answer)
        except TimeoutError:
            answer.failure = f"the body did not end within {timeout:.0f} s"
        except (http.client.HTTPException, OSError) as exc:
            answer.failure = f"{type(exc).__name__} while reading the body: {exc}"
    finally:
        answer.seconds = time.monotonic() - started
        sock.close()
    return answer


def _read_body(response: http.client.HTTPResponse, answer: HttpAnswer) -> None:
    while chunk := response.read(65536):
        answer.body_size += len(chunk)
        if len(answer.body) < KEEP_BYTES:
            answer.body += chunk


def _read_stream(
    response: http.client.HTTPResponse, answer: HttpAnswer, sock: socket.socket, until: float
) -> None:
    while True:
        left = until - time.monotonic()
        if left <= 0:
            answer.stream_cut = True
            return
        sock.settimeout(left)
        try:
            line = response.readline()
        except TimeoutError:
            answer.stream_cut = True
            return
        if not line:
            return
        answer.body_size += len(line)
        if len(answer.body) < KEEP_BYTES:
            answer.body += line


# --- gRPC ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GrpcCase:
    """One gRPC call: the method's full name, the request's bytes, the metadata."""

    dialect: str
    what: str
    service: str
    method: str
    payload: bytes
    metadata: tuple[tuple[str, str | bytes], ...] = ()
    streaming: bool = False
    served: bool = True  # a method the platform serves (else UNIMPLEMENTED is the answer)
    response_type: str = ""  # the full name of the method's response message

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.method}"


@dataclass
class GrpcAnswer:
    code: str = "OK"
    details: str = ""
    trailing: list[tuple[str, Any]] = field(default_factory=list)
    responses: list[bytes] = field(default_factory=list)
    failure: str = ""
    seconds: float = 0.0
    stream_cut: bool = False


# Responses of a stream read at most: enough to see each kind of event.
STREAM_RESPONSES = 20


def send_grpc(channel: grpc.Channel, case: GrpcCase, timeout: float) -> GrpcAnswer:
    answer = GrpcAnswer()
    started = time.monotonic()
    metadata = list(case.metadata)
    try:
        if case.streaming:
            call = channel.unary_stream(case.path)(
                case.payload, metadata=metadata, timeout=min(timeout, STREAM_READ_SECONDS)
            )
            try:
                for response in call:
                    answer.responses.append(response)
                    if len(answer.responses) >= STREAM_RESPONSES:
                        answer.stream_cut = True
                        call.cancel()
                        break
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED and answer.responses:
                    answer.stream_cut = True  # open, and it answered: not a hang
                elif error.code() != grpc.StatusCode.CANCELLED or not answer.stream_cut:
                    raise
        else:
            response = channel.unary_unary(case.path)(
                case.payload, metadata=metadata, timeout=timeout
            )
            answer.responses.append(response)
    except grpc.RpcError as error:
        answer.code = error.code().name  # type: ignore[attr-defined]
        answer.details = error.details() or ""  # type: ignore[attr-defined]
        answer.trailing = list(error.trailing_metadata() or ())  # type: ignore[attr-defined]
    except Exception as exc:  # the client library refused: the case is the fuzzer's fault
        answer.failure = f"client error {type(exc).__name__}: {exc}"
    answer.seconds = time.monotonic() - started
    return answer
