"""The web process: daphne as the platform runs it, `python -m a2a_platform.webserver [daphne's
options] a2a_platform.asgi:application` (what manage.py runweb starts).

daphne's own classes, configured and subclassed, for what its defaults do not do:

- **A drain on SIGTERM** (`A2AServer`). daphne cancels every request in flight as soon as
  the signal comes (its `kill_all_applications`, Twisted's "before shutdown" trigger): a
  blocking send got no answer and a stream no end. Here the trigger drains first
  (a2a_platform.drain): the listening socket closes, readiness answers 503, answers close
  their connections, and what is in flight gets `A2A_DRAIN_SECONDS`; then blocking sends are
  answered with their tasks as they are, streams end with a hint to resume, idle connections
  close, and only what is still running after that is cancelled.
- **Answers instead of resets** (`A2AChannel`, `A2ARequest`). Twisted's HTTP/1.1 parser drops
  the connection on a request line over 16 KiB, and answers headers over 16 KiB, or a request
  it cannot parse, with a bare `400` and no body; daphne answers a few things it refuses with
  an HTML page. Here they are 414 (URI too long), 431 (headers too large) or 400, with the
  `google.rpc.Status` JSON body of the REST binding, and the connection is closed without
  resetting the answer away.
- **No form parsing** (`A2ARequest`): Twisted parses every POST's form arguments (reading its
  Content-Type with the `email` package, a twentieth of a GetTask's CPU), which daphne never
  reads: it hands the raw body to the application.

The request path itself is unchanged: every addition is on an error path, at a connection's
start and end, or one flag read as an answer starts.
"""

from __future__ import annotations

# daphne.server first: it installs Twisted's asyncio reactor, which must come before any other
# import of Twisted's reactor.
import daphne.server  # isort: skip

import asyncio
import json
from http import HTTPStatus
from typing import Any

from daphne import http_protocol
from daphne.cli import CommandLineInterface
from django.conf import settings
from twisted.internet import defer
from twisted.internet.interfaces import IDelayedCall, IListeningPort
from twisted.web import http

from a2a_platform import drain
from a2a_platform.versions import V1_0
from agents.errors import RequestError
from bindings.errors import problem_of, rest_body
from tasks_app.errors import InternalError

# After the grace, how long blocking sends get to be answered (their task read) and streams to
# write their last bytes before what still runs is cancelled.
ANSWER_SECONDS = 2.0
# Then how long the connections get to send what is written and close.
CLOSE_SECONDS = 1.0
# How long a refused request's connection stays open, its input read and dropped, so that the
# answer reaches a client still sending rather than being reset away (see A2AChannel._refuse).
LINGER_SECONDS = 5.0


class UriTooLong(RequestError):
    http_status = 414
    reason = "URI_TOO_LONG"


class HeaderFieldsTooLarge(RequestError):
    http_status = 431
    reason = "REQUEST_HEADER_FIELDS_TOO_LARGE"


class MalformedRequest(RequestError):
    """Not HTTP/1.1 this server can read (400)."""


class Unavailable(RequestError):
    http_status = 503
    grpc_status = "UNAVAILABLE"
    reason = "UNAVAILABLE"


def error_answer(error: BaseException) -> tuple[int, bytes]:
    """The status and JSON body of `error`, as the REST binding answers it (v1.0's
    `google.rpc.Status`): the request was not read far enough to know its binding."""
    problem = problem_of(error)
    return problem.http_status, json.dumps(rest_body(problem, V1_0)).encode()


def _drop(*args: Any) -> None:
    """Input after a refusal: read, and dropped."""


class A2AChannel(http.HTTPChannel):
    """Twisted's HTTP/1.1 connection, answering what it refuses to read with a status and a
    JSON body. Its limits stay: a request line, or a header line, of `MAX_LENGTH` (16 KiB);
    the request line and headers together of `totalHeadersSize` (16 KiB); `maxHeaders` (500)
    headers."""

    _lingering: IDelayedCall | None = None

    def lineLengthExceeded(self, line: bytes) -> None:
        """A line over `MAX_LENGTH`: Twisted closed the connection without a word."""
        if self._receivedHeaderSize == 0:  # nothing of this request counted yet: its first line
            self._refuse(
                UriTooLong(
                    f"The request line (method, URL, version) is over {self.MAX_LENGTH} bytes: "
                    "send a shorter URL (long parameters belong in a POST body)."
                )
            )
        else:
            self._refuse(
                HeaderFieldsTooLarge(
                    f"A request header line is over {self.MAX_LENGTH} bytes: send shorter headers."
                )
            )

    def _respondToBadRequestAndDisconnect(self) -> None:
        """Every request Twisted refuses while reading it comes here (it wrote a bare 400)."""
        if self._receivedHeaderCount > self.maxHeaders:
            self._refuse(
                HeaderFieldsTooLarge(
                    f"The request has more than {self.maxHeaders} headers: send fewer."
                )
            )
        elif self._receivedHeaderSize > self.totalHeadersSize:
            self._refuse(
                HeaderFieldsTooLarge(
                    f"The request line and headers are over {self.totalHeadersSize} bytes "
                    "together: send shorter headers or a shorter URL."
                )
            )
        else:
            self._refuse(
                MalformedRequest(
                    "The request is not valid HTTP/1.1: its request line, a header (a name "
                    "that is not a token, a value with a control character), or how its body "
                    "is framed (Content-Length, Transfer-Encoding, chunks) is malformed."
                )
            )

    def _refuse(self, error: RequestError) -> None:
        """Answer `error` and close without reading on. A plain close while the client still
        sends (the rest of a long line) makes the kernel reset the connection, and a reset can
        drop the answer before the client reads it; so the write side is shut after the answer,
        and what still comes in is read and dropped until the client closes, or for
        LINGER_SECONDS."""
        status, body = error_answer(error)
        head = (
            f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        # Nothing more is read as HTTP: Twisted's parser would go on with the lines after.
        self.clearLineBuffer()
        self.dataReceived = self.lineReceived = self.rawDataReceived = _drop  # type: ignore[method-assign]
        self.setTimeout(None)
        self.transport.loseWriteConnection()
        self._lingering = self.callLater(LINGER_SECONDS, self.transport.abortConnection)

    def connectionLost(self, reason: Any) -> None:
        if self._lingering is not None and self._lingering.active():
            self._lingering.cancel()
        self.factory.channels.discard(self)
        super().connectionLost(reason)


class A2ARequest(http_protocol.WebRequest):
    """daphne's request: without Twisted's form parsing; with its own errors (an invalid header
    or path, an exception in the application) in the JSON body; and, once the process drains,
    with each answer closing its connection, so that the client's next request goes to another
    process."""

    # daphne's texts, said fully.
    MESSAGES = {
        "Invalid header name": "A header name is not an HTTP token.",
        "Invalid header value": "A header value holds a control character.",
        "Invalid characters in path": (
            "The path holds bytes that are not ASCII: percent-encode them."
        ),
        "Invalid query string": (
            "The query string holds bytes that are not ASCII: percent-encode them."
        ),
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["parsePOSTFormSubmission"] = False
        super().__init__(*args, **kwargs)

    def handle_reply(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start" and drain.draining() and self.channel:
            self.channel.persistent = False
            self.responseHeaders.setRawHeaders(b"Connection", [b"close"])
        super().handle_reply(message)

    def basic_error(self, status: int, status_text: bytes, body: str) -> None:
        """daphne's error page, as a JSON body."""
        error: Exception
        if status == 400:
            error = MalformedRequest(self.MESSAGES.get(body, f"{body}."))
        elif status == 503:
            error = Unavailable(f"{body}")
        else:
            error = InternalError("The server failed to process this request; it has been logged.")
        code, content = error_answer(error)
        self.handle_reply(
            {
                "type": "http.response.start",
                "status": code,
                "headers": [
                    (b"Content-Type", b"application/json"),
                    (b"Content-Length", str(len(content)).encode()),
                ],
            }
        )
        self.handle_reply({"type": "http.response.body", "body": content})


class A2AHTTPFactory(http_protocol.HTTPFactory):
    """daphne's factory, making A2AChannel connections with A2ARequest requests, and knowing
    them all (a drain closes the idle ones). The channel is Twisted's HTTP/1.1 one without its
    HTTP/2 negotiation, which needs TLS in daphne: the web processes serve plain HTTP/1.1
    behind the proxy that ends TLS (docs/production.md)."""

    protocol = A2AChannel

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.channels: set[A2AChannel] = set()

    def buildProtocol(self, addr: Any) -> A2AChannel:
        # Twisted's, not daphne's, which would set daphne's own request class.
        channel = http.HTTPFactory.buildProtocol(self, addr)
        channel.requestFactory = A2ARequest
        self.channels.add(channel)
        return channel


class A2AServer(daphne.server.Server):
    """daphne's server, draining on SIGTERM before it cancels what still runs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ports: list[IListeningPort] = []

    def listen_success(self, port: IListeningPort) -> None:
        self.ports.append(port)
        super().listen_success(port)

    def kill_all_applications(self) -> defer.Deferred[None]:
        """daphne's "before shutdown" trigger: Twisted stops the reactor once it fires."""
        return defer.Deferred.fromFuture(asyncio.ensure_future(self._drain()))

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        grace = settings.A2A_DRAIN_SECONDS
        drain.begin(grace)
        for port in self.ports:
            port.stopListening()  # new connections are refused, or go to another process
        print(f"web: draining: requests in flight get up to {grace:g} s", flush=True)
        stop_at = loop.time() + grace + ANSWER_SECONDS
        while self._running() and loop.time() < stop_at:
            await asyncio.sleep(0.05)
        # Every connection closes once what is written has been sent: the idle ones, and
        # those whose answer has just been written.
        channels = self.http_factory.channels
        for channel in list(channels):
            channel.loseConnection()
        close_by = loop.time() + CLOSE_SECONDS
        while channels and loop.time() < close_by:
            await asyncio.sleep(0.05)
        cut = self._running()
        for application in cut:
            application.cancel()
        await asyncio.gather(*cut, return_exceptions=True)
        if cut:
            print(f"web: drained; {len(cut)} requests still running were cancelled", flush=True)

    def _running(self) -> list[asyncio.Future[None]]:
        """The application instances still running (requests not yet answered in full)."""
        return [
            application
            for details in self.connections.values()
            if (application := details.get("application_instance")) is not None
            and not application.done()
        ]


class A2ACommandLine(CommandLineInterface):
    server_class = A2AServer


# daphne's Server.run builds its HTTP factory from this name.
daphne.server.HTTPFactory = A2AHTTPFactory  # type: ignore[misc]

if __name__ == "__main__":
    A2ACommandLine.entrypoint()
