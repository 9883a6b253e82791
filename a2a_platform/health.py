"""Liveness and readiness: /healthz answers while the process runs; /readyz checks that the
database, the Celery broker and the channel layer can be reached, and names what cannot. From
SIGTERM on (a2a_platform.drain) /readyz answers 503 at once, saying so, and /healthz still 200:
the process is stopping on purpose, and a load balancer sends its new requests elsewhere."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, JsonResponse

from a2a_platform import drain
from a2a_platform.db import db

CHECK_TIMEOUT_SECONDS = 3.0


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    from a2a_platform.celery import app

    with app.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1, timeout=CHECK_TIMEOUT_SECONDS)


async def _channel_layer() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    channel = await layer.new_channel("readyz.")
    probe = {"type": "readyz.probe", "nonce": str(uuid.uuid4())}
    receiving = asyncio.ensure_future(layer.receive(channel))
    try:
        while not receiving.done():
            # Sent again until it arrives: on the pub/sub layer a message published before
            # Redis has taken the channel's subscription is lost, as pub/sub is.
            await layer.send(channel, probe)
            await asyncio.wait((receiving,), timeout=0.2)
        if receiving.result() != probe:
            raise RuntimeError("the channel layer returned another message")
    finally:
        receiving.cancel()
        await asyncio.gather(receiving, return_exceptions=True)
        if delete := getattr(layer, "delete_channel", None):
            await delete(channel)


CHECKS: dict[str, Callable[[], Awaitable[None]]] = {
    # On the database threads the requests use: a pool too busy to answer in time is not ready.
    "database": db(_database),
    "broker": sync_to_async(_broker, thread_sensitive=False),
    "channel_layer": _channel_layer,
}


async def _run(check: Callable[[], Awaitable[None]]) -> str:
    try:
        await asyncio.wait_for(check(), CHECK_TIMEOUT_SECONDS)
    except TimeoutError:
        return f"unreachable: no answer within {CHECK_TIMEOUT_SECONDS:g} s"
    except Exception as exc:  # any failure is the answer: what is wrong, not a 500
        return f"unreachable: {type(exc).__name__}: {str(exc)[:200]}"
    return "ok"


async def readyz(request: HttpRequest) -> JsonResponse:
    if drain.draining():
        return JsonResponse(
            {
                "status": "draining",
                "detail": "This process is stopping: it finishes what is in flight and takes "
                "no new work. Send requests to another process.",
            },
            status=503,
        )
    results = await asyncio.gather(*(_run(check) for check in CHECKS.values()))
    checks = dict(zip(CHECKS, results, strict=True))
    ready = all(result == "ok" for result in results)
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )
