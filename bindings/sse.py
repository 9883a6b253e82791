"""Server-Sent Events for every streaming method of the HTTP bindings.

Each event's `id:` is `<task-id>:<seq>`, which a client sends back as `Last-Event-ID` to resume;
its `data:` is whatever the binding wraps a rendered result in (a JSON-RPC response, or the
bare REST object). An error after the stream has begun goes out as an `event: error` frame.
A stream that its process's drain ends (tasks_app.operations.ServerDraining) is not an error:
it ends with a `retry:` field, as a complete response, and the client reconnects (to another
process) with `Last-Event-ID`, missing nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from django.http import StreamingHttpResponse

from a2a_platform.metrics import SSE_STREAMS_OPEN
from tasks_app.operations import ServerDraining, Stream
from tasks_app.streams import StreamItem

# A comment line: proxies and clients see the connection is alive; no event is sent.
KEEP_ALIVE = b": keep-alive\n\n"
# The last bytes of a stream cut by its process's drain: a comment saying why, and how long
# (ms) a client waits before it reconnects: a moment, as another process is there to answer.
DRAINED = b": this server is stopping; reconnect with Last-Event-ID to resume\nretry: 1000\n\n"


@dataclass(frozen=True)
class SseStream:
    """A streaming method's answer: the items, and how one becomes a result in the dialect
    (or a list of results, each sent as a frame of its own)."""

    items: Stream
    render: Callable[[StreamItem], Any]


def sse_frame(data: Any, *, event_id: str | int | None = None, event: str | None = None) -> bytes:
    """One frame: its `event:` and `id:` lines when given, `data` as JSON, and the blank line
    that ends it. Every SSE frame the platform sends is written here (the console's too)."""
    head = f"event: {event}\n" if event else ""
    if event_id is not None:
        head += f"id: {event_id}\n"
    return f"{head}data: {json.dumps(data)}\n\n".encode()


def sse_response(
    stream: SseStream,
    wrap: Callable[[Any], Any],
    error_body: Callable[[BaseException], Any],
) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        _frames(stream, wrap, error_body), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # tell nginx-style proxies not to buffer the stream
    return response


async def _frames(
    stream: SseStream, wrap: Callable[[Any], Any], error_body: Callable[[BaseException], Any]
) -> AsyncIterator[bytes]:
    SSE_STREAMS_OPEN.inc()
    try:
        async with contextlib.aclosing(stream.items) as items:
            async for item in items:
                if item is None:
                    yield KEEP_ALIVE
                    continue
                results = stream.render(item)
                results = results if isinstance(results, list) else [results]
                for n, result in enumerate(results, start=1):
                    # Several frames for one event: only the last names the event, so a client
                    # that drops in between resumes before it and misses none of them.
                    last = n == len(results)
                    yield sse_frame(wrap(result), event_id=item.event_id if last else None)
    except ServerDraining:
        yield DRAINED
    except Exception as exc:  # what A2A names goes out as it is; anything else is logged
        yield sse_frame(error_body(exc), event="error")
    finally:
        SSE_STREAMS_OPEN.dec()  # also when the client left: closing the generator lands here
