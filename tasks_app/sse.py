"""Server-Sent Events for every streaming method of the HTTP bindings.

Each event's `id:` is `<task-id>:<seq>`, which a client sends back as `Last-Event-ID` to resume;
its `data:` is whatever the binding wraps a rendered result in (a JSON-RPC response, or the
bare REST object). An error after the stream has begun goes out as an `event: error` frame.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from django.http import StreamingHttpResponse

from a2a_platform.metrics import SSE_STREAMS_OPEN

from .errors import A2AError, InternalError
from .operations import Stream
from .streams import StreamItem

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SseStream:
    """A streaming method's answer: the items, and how one becomes a result in the dialect
    (or a list of results, each sent as a frame of its own)."""

    items: Stream
    render: Callable[[StreamItem], Any]


def sse_response(
    stream: SseStream,
    wrap: Callable[[Any], Any],
    error_body: Callable[[A2AError], Any],
) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        _frames(stream, wrap, error_body), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-store"
    response["X-Accel-Buffering"] = "no"  # tell nginx-style proxies not to buffer the stream
    return response


async def _frames(
    stream: SseStream, wrap: Callable[[Any], Any], error_body: Callable[[A2AError], Any]
) -> AsyncIterator[bytes]:
    SSE_STREAMS_OPEN.inc()
    try:
        async with contextlib.aclosing(stream.items) as items:
            async for item in items:
                if item is None:
                    yield b": keep-alive\n\n"
                    continue
                results = stream.render(item)
                results = results if isinstance(results, list) else [results]
                for n, result in enumerate(results, start=1):
                    body = json.dumps(wrap(result))
                    # Several frames for one event: only the last names the event, so a client
                    # that drops in between resumes before it and misses none of them.
                    event_id = f"id: {item.event_id}\n" if n == len(results) else ""
                    yield f"{event_id}data: {body}\n\n".encode()
    except A2AError as exc:
        yield f"event: error\ndata: {json.dumps(error_body(exc))}\n\n".encode()
    except Exception:
        logger.exception("Stream failed")
        error = InternalError("The stream failed on the server; it has been logged.")
        yield f"event: error\ndata: {json.dumps(error_body(error))}\n\n".encode()
    finally:
        SSE_STREAMS_OPEN.dec()  # also when the client left: closing the generator lands here
