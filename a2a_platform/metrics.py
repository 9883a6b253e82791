"""Prometheus metrics: the /metrics view, the instruments each process keeps, and the numbers
read from the database and the broker at scrape time.

Two kinds of numbers, with different scopes:

- In-process instruments (send latency, open SSE streams) count what *this* process served.
  daphne exposes its own at /metrics; the gRPC sidecar is another process and exposes its own on
  A2A_GRPC_METRICS_LISTEN (`start_sidecar_metrics_server`). Prometheus scrapes both.
- The storage collector (tasks by state, push attempts, dead deliveries, queue depths) reads
  PostgreSQL and the broker, which every process shares: any web process reports the whole
  cluster, so with several web processes aggregate these with max(), not sum().
- The usage collector (a2a_usage_*) reads today's per-day usage rows, which every process
  (web, sidecar, workers) adds its counts to: whole-cluster numbers too, aggregated the same
  way. Workers serve no /metrics, so what they count (runs, tokens, push) reaches Prometheus
  only this way.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hmac
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from socketserver import ThreadingMixIn
from typing import Any, ParamSpec, TypeVar
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import (
    CollectorRegistry,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from a2a_platform.versions import SUPPORTED_VERSIONS

logger = logging.getLogger(__name__)

SEND_METHODS = ("SendMessage", "SendStreamingMessage")
OUTCOMES = ("ok", "error")
PUSH_OUTCOMES = ("delivered", "retry", "dead")  # DeliveryAttempt.outcome
BROKER_TIMEOUT_SECONDS = 3.0

# --- in-process instruments -----------------------------------------------------------------

# Labels are bounded: 2 methods x 3 dialects x 2 outcomes. The binding (JSON-RPC or REST) is
# not known to the operations; the process (daphne or the sidecar) tells HTTP from gRPC.
SEND_LATENCY = Histogram(
    "a2a_send_latency_seconds",
    "SendMessage: time until the answer (a blocking send includes the wait for the agent). "
    "SendStreamingMessage: time until the stream's first event. Counted in this process.",
    ["method", "dialect", "outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
    registry=None,
)
for _method in SEND_METHODS:
    for _dialect in SUPPORTED_VERSIONS:
        for _outcome in OUTCOMES:
            # Series exist at 0 from the start, so rate() sees the first call.
            SEND_LATENCY.labels(_method, _dialect, _outcome)

SSE_STREAMS_OPEN = Gauge(
    "a2a_sse_streams_open", "SSE responses this process is streaming now.", registry=None
)
DOORBELL_WAITERS = Gauge(
    "a2a_doorbell_waiters",
    "Waits on a task's doorbell in this process now (blocking sends, streams, cancels).",
    registry=None,
)


P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


def _observe(method: str, dialect: str, outcome: str, started: float) -> None:
    SEND_LATENCY.labels(method, dialect, outcome).observe(time.perf_counter() - started)


def timed_send(operation: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Observe a SendMessage operation (keyword arguments, one of them its `caller`) until it
    answers. A call cancelled because its client left got no answer and is not observed."""

    @functools.wraps(operation)
    async def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        caller: Any = kwargs["caller"]  # an operation's Caller: it knows its dialect
        started = time.perf_counter()
        try:
            result = await operation(*args, **kwargs)
        except Exception:
            _observe("SendMessage", caller.dialect, "error", started)
            raise
        _observe("SendMessage", caller.dialect, "ok", started)
        return result

    return timed


def timed_send_stream(
    operation: Callable[P, Awaitable[AsyncIterator[T | None]]],
) -> Callable[P, Awaitable[AsyncIterator[T | None]]]:
    """Observe a SendStreamingMessage operation until its stream yields its first event
    (keep-alives, None, are not events)."""

    @functools.wraps(operation)
    async def timed(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T | None]:
        caller: Any = kwargs["caller"]  # an operation's Caller: it knows its dialect
        started = time.perf_counter()
        try:
            stream = await operation(*args, **kwargs)
        except Exception:
            _observe("SendStreamingMessage", caller.dialect, "error", started)
            raise
        return _until_first_event(stream, caller.dialect, started)

    return timed


async def _until_first_event(
    stream: AsyncIterator[T | None], dialect: str, started: float
) -> AsyncIterator[T | None]:
    answered = False
    async with contextlib.aclosing(stream) as items:  # type: ignore[type-var]
        try:
            async for item in items:
                if item is not None and not answered:
                    answered = True
                    _observe("SendStreamingMessage", dialect, "ok", started)
                yield item
        except Exception:
            if not answered:
                _observe("SendStreamingMessage", dialect, "error", started)
            raise


# --- read at scrape time --------------------------------------------------------------------


# The app selectors a scrape reads the database with, handed over by the apps when Django
# starts (tasks_app.apps, push_app.apps): the apps import the instruments of this module, so
# it imports none of them.
_READERS: dict[str, Callable[[], Any]] = {}


def scrape_reader_register(name: str, reader: Callable[[], Any]) -> None:
    _READERS[name] = reader


class StorageCollector(Collector):
    """Counts read from PostgreSQL and the broker on each scrape: exact for the whole cluster.

    A part that cannot be read is left out and its `*_up` gauge says 0, so the instruments
    still reach Prometheus while the database or the broker is down.
    """

    def describe(self) -> Iterable[Metric]:
        # Declared, so registering the collector does not run its queries.
        return [
            *_database_families(),
            _depth_family(),
            _up_family("a2a_database_up", "database"),
            _up_family("a2a_celery_broker_up", "Celery broker"),
        ]

    def collect(self) -> Iterator[Metric]:
        yield from self._database()
        yield from self._broker()

    def _database(self) -> Iterator[Metric]:
        up = _up_family("a2a_database_up", "database")
        try:
            tasks = _READERS["task_counts_by_agent"]()
            attempts = _READERS["delivery_attempt_counts"]()
            dead = _READERS["delivery_dead_count"]()
        except DatabaseError as exc:
            logger.warning("Metrics: the database could not be read: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        task_family, attempt_family, dead_family = _database_families()
        # Every state of an agent that has tasks, 0 included (the selector fills them in).
        for (tenant, agent), counts in sorted(tasks.items()):
            for state, n in counts.items():
                task_family.add_metric([tenant, agent, state], n)
        for outcome in sorted({*PUSH_OUTCOMES, *attempts}):
            attempt_family.add_metric([outcome], attempts.get(outcome, 0))
        dead_family.add_metric([], dead)
        up.add_metric([], 1)
        yield from (task_family, attempt_family, dead_family, up)

    def _broker(self) -> Iterator[Metric]:
        from a2a_platform.queues import queue_depths, within

        up = _up_family("a2a_celery_broker_up", "Celery broker")
        try:  # a broker that hangs costs a scrape seconds, not the scrape
            depths = within(BROKER_TIMEOUT_SECONDS, queue_depths)
        except NotImplementedError:
            return  # a broker whose queues are not read: neither a depth nor "down"
        except Exception as exc:  # down, refusing, or too slow: the answer is 0
            logger.warning("Metrics: the Celery broker could not be read: %r", exc)
            up.add_metric([], 0)
            yield up
            return
        depth = _depth_family()
        for queue, n in sorted(depths.items()):
            depth.add_metric([queue], n)
        up.add_metric([], 1)
        yield from (depth, up)


def _database_families() -> tuple[GaugeMetricFamily, CounterMetricFamily, GaugeMetricFamily]:
    return (
        GaugeMetricFamily(
            "a2a_tasks",
            "Tasks by tenant, agent and state (the A2A v1.0 TaskState name).",
            labels=["tenant", "agent", "state"],
        ),
        CounterMetricFamily(
            "a2a_push_attempts",
            "Push delivery attempts (POSTs) ever recorded, by outcome: delivered, retry "
            "(failed, will be tried again) or dead (failed for good). Deleting tasks deletes "
            "their attempts, which rate() reads as a counter reset.",
            labels=["outcome"],
        ),
        GaugeMetricFamily(
            "a2a_push_deliveries_dead",
            "Push deliveries dead-lettered (permanent failure or out of attempts), waiting for "
            "an operator to redeliver them.",
        ),
    )


def _depth_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "a2a_celery_queue_depth",
        "Celery jobs waiting in each queue (not yet taken by a worker).",
        labels=["queue"],
    )


def _up_family(name: str, what: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, f"1 if the {what} answered this scrape, else 0.")


class UsageCollector(Collector):
    """Today's usage (UTC) read from the per-day rows every process adds to (agents.usage): the
    whole platform's, whichever web process is scraped, as the storage counts are (aggregate
    with max(), not sum()). Counters that start again from 0 at midnight UTC, which rate() and
    increase() read as a counter reset; they lag the processes by up to
    A2A_USAGE_FLUSH_SECONDS. By tenant only with A2A_METRICS_TENANT_LABEL: one series per
    tenant with usage today; else a few series in all."""

    def describe(self) -> Iterable[Metric]:
        return _usage_families(settings.A2A_METRICS_TENANT_LABEL)

    def collect(self) -> Iterator[Metric]:
        by_tenant = settings.A2A_METRICS_TENANT_LABEL
        reader = _READERS.get("usage_today")
        if reader is None:
            return
        try:
            totals = reader(by_tenant=by_tenant)
        except DatabaseError as exc:  # a2a_database_up says so
            logger.warning("Metrics: usage could not be read: %s", exc)
            return
        families = _usage_families(by_tenant)
        requests, runs, seconds, tokens, pushes, refused = families
        for tenant, counts in sorted(totals.items()):
            own = [tenant] if by_tenant else []
            requests.add_metric(own, counts["requests"])
            runs.add_metric(own, counts["runs"])
            seconds.add_metric(own, counts["run_seconds"])
            tokens.add_metric([*own, "in"], counts["tokens_in"])
            tokens.add_metric([*own, "out"], counts["tokens_out"])
            pushes.add_metric(own, counts["push_deliveries"])
            for reason in USAGE_REFUSALS:
                refused.add_metric([*own, reason], counts[f"refused_{reason}"])
        yield from families


USAGE_REFUSALS = ("rate", "quota", "concurrency")


def _usage_families(by_tenant: bool) -> tuple[CounterMetricFamily, ...]:
    tenant = ["tenant"] if by_tenant else []
    today = " today (UTC), every process's, as flushed to the database"

    def family(name: str, what: str, *labels: str) -> CounterMetricFamily:
        return CounterMetricFamily(name, what + today + ".", labels=[*tenant, *labels])

    return (
        family("a2a_usage_requests", "A2A calls that reached an agent"),
        family("a2a_usage_runs", "Agent runs started"),
        family("a2a_usage_run_seconds", "Seconds of agent runs, claim to release"),
        family(
            "a2a_usage_tokens",
            "Model tokens, by direction (in: prompts, out: replies)",
            "direction",
        ),
        family("a2a_usage_push_deliveries", "Push notification POSTs attempted"),
        family("a2a_usage_refused", "A2A calls refused over a limit, by reason", "reason"),
    )


FROZEN_OBJECTS = Gauge(
    "a2a_gc_frozen_objects",
    "Objects this process loaded at start-up and moved out of garbage collection "
    "(a2a_platform.heap); 0 means every full collection walks them all.",
    registry=None,
)
FROZEN_OBJECTS.set_function(gc.get_freeze_count)


def _registry(*collectors: Collector) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    # The process's CPU, memory, file descriptors, Python version and GC, as usual.
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


# What daphne's /metrics shows, and what the sidecar's port shows (no SSE there, and the
# storage numbers are daphne's to report: reading them twice would only cost queries).
WEB_REGISTRY = _registry(
    SEND_LATENCY,
    SSE_STREAMS_OPEN,
    DOORBELL_WAITERS,
    FROZEN_OBJECTS,
    StorageCollector(),
    UsageCollector(),
)
SIDECAR_REGISTRY = _registry(SEND_LATENCY, DOORBELL_WAITERS, FROZEN_OBJECTS)

# --- exposition -----------------------------------------------------------------------------

WWW_AUTHENTICATE = 'Bearer realm="metrics"'
UNAUTHORIZED = b"Send the metrics token: Authorization: Bearer <A2A_METRICS_TOKEN>.\n"


CLOSED = (
    "/metrics is closed: it names every tenant and agent. Set A2A_METRICS_TOKEN and scrape "
    "with 'Authorization: Bearer <token>', or set A2A_METRICS_OPEN=true on a private network.\n"
)


def refusal(authorization: str | None) -> tuple[int, bytes, list[tuple[str, str]]] | None:
    """Why a scrape is refused (status, body, headers), or None to serve it. With a token, the
    Authorization header must carry it (compared in constant time); without one, /metrics is
    closed unless the operator opened it."""
    token = settings.A2A_METRICS_TOKEN
    if not token:
        return None if settings.A2A_METRICS_OPEN else (403, CLOSED.encode(), [])
    scheme, _, presented = (authorization or "").strip().partition(" ")
    if scheme.lower() == "bearer" and hmac.compare_digest(
        presented.strip().encode(), token.encode()
    ):
        return None
    return 401, UNAUTHORIZED, [("WWW-Authenticate", WWW_AUTHENTICATE)]


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of this web process and of the shared storage."""
    if refused := refusal(request.headers.get("Authorization")):
        status, body, headers = refused
        response = HttpResponse(body, status=status, content_type="text/plain")
        for name, value in headers:
            response[name] = value
        return response
    return HttpResponse(generate_latest(WEB_REGISTRY), content_type=CONTENT_TYPE_LATEST)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per scrape would drown the sidecar's log


def start_sidecar_metrics_server(address: str) -> WSGIServer:
    """Serve SIDECAR_REGISTRY on `address` (host:port), any path, from a daemon thread: the
    same exposition and token as /metrics. (prometheus_client's start_http_server takes no
    token.)"""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if refused := refusal(environ.get("HTTP_AUTHORIZATION")):
            status, body, headers = refused
            reason = "Forbidden" if status == 403 else "Unauthorized"
            start_response(f"{status} {reason}", [("Content-Type", "text/plain"), *headers])
            return [body]
        if environ["REQUEST_METHOD"] not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return []
        body = generate_latest(SIDECAR_REGISTRY)
        start_response(
            "200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))]
        )
        return [body] if environ["REQUEST_METHOD"] == "GET" else []

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][0]

    server = make_server(host, int(port), app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
