"""Console pages for running the platform: Celery workers and queues (operators only), the push
delivery outbox with redelivery, and per-agent charts of throughput, latency and errors."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from celery.utils.saferepr import saferepr
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Q,
    QuerySet,
    Value,
    When,
    Window,
)
from django.db.models.functions import RowNumber
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from a2a_platform.beat import beat_last_tick, beat_stale_after_seconds
from a2a_platform.celery import app
from a2a_platform.queues import queue_depths, within
from agents.models import Agent
from push_app.delivery import delivery_redeliver
from push_app.models import Delivery
from tasks_app.models import TERMINAL_STATES, Task

from . import charts
from .models import JobFailure
from .scoping import (
    User,
    agent_from_path,
    agent_path,
    agent_paths,
    can_manage,
    delivery_or_404,
    require_manager,
    require_operator,
    visible_agents,
    visible_deliveries,
    visible_tasks,
)

# --- workers -----------------------------------------------------------------------------

# How long workers get to answer a broadcast. Celery waits the whole timeout for the first
# one (it cannot know how many workers there are); the next ones stop at the known count.
INSPECT_TIMEOUT_SECONDS = 1.0
BROKER_CONNECT_TIMEOUT_SECONDS = 2.0
# The whole broker part of the page, whatever hangs (a blackholed broker host has no socket
# timeout): past this the page is rendered without it. It covers the connection and four
# broadcasts (stats, active, reserved, job_stats) of up to INSPECT_TIMEOUT_SECONDS each.
BROKER_DEADLINE_SECONDS = 8.0
JOB_FAILURES_SHOWN = 50
JOB_ARGS_SHOWN = 200


class JobInfo(TypedDict):
    id: str
    name: str
    args: str
    started_at: datetime | None
    worker_pid: int | None


@dataclass
class WorkerInfo:
    hostname: str
    answered_ms: int | None  # round trip of the stats broadcast: the worker's heartbeat
    pid: int | None = None
    uptime_seconds: int | None = None
    concurrency: int | None = None
    processed: dict[str, int] = field(default_factory=dict)
    active: list[JobInfo] = field(default_factory=list)
    reserved: list[JobInfo] = field(default_factory=list)
    answered_at: datetime | None = None
    # Per job kind since the worker started (console.jobstats): finished, failed, durations.
    kinds: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def processed_total(self) -> int:
        return sum(self.processed.values())

    @property
    def uptime(self) -> str:
        seconds = self.uptime_seconds or 0
        if seconds < 120:
            return f"{seconds} s"
        if seconds < 7200:
            return f"{seconds // 60} min"
        if seconds < 172800:
            return f"{seconds // 3600} h {seconds % 3600 // 60} min"
        return f"{seconds // 86400} d {seconds % 86400 // 3600} h"


@dataclass
class BrokerReport:
    transport: str
    depths: dict[str, int] | None = None
    depths_error: str = ""
    workers: list[WorkerInfo] = field(default_factory=list)
    workers_error: str = ""
    unreachable: str = ""  # why the broker could not be reached at all


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _job(request: dict[str, Any]) -> JobInfo:
    started = request.get("time_start")
    return JobInfo(
        id=str(request.get("id", "")),
        name=str(request.get("name", "")),
        args=saferepr(
            {"args": request.get("args"), "kwargs": request.get("kwargs")}, maxlen=JOB_ARGS_SHOWN
        ),
        started_at=(
            datetime.fromtimestamp(started, tz=timezone.get_current_timezone())
            if isinstance(started, int | float)
            else None
        ),
        worker_pid=request.get("worker_pid"),
    )


def _workers(connection: Any) -> list[WorkerInfo]:
    """The workers that answer a `stats` broadcast, then their active and reserved jobs."""
    sent = time.monotonic()
    heard: dict[str, tuple[float, datetime]] = {}

    def on_reply(reply: dict[str, Any]) -> None:
        for hostname in reply:
            heard.setdefault(hostname, (time.monotonic(), timezone.now()))

    stats = (
        app.control.inspect(
            timeout=INSPECT_TIMEOUT_SECONDS, connection=connection, callback=on_reply
        ).stats()
        or {}
    )
    workers = {
        name: WorkerInfo(
            hostname=name,
            answered_ms=int((heard[name][0] - sent) * 1000) if name in heard else None,
            answered_at=heard[name][1] if name in heard else timezone.now(),
            pid=info.get("pid"),
            uptime_seconds=info.get("uptime"),
            concurrency=(info.get("pool") or {}).get("max-concurrency"),
            processed=dict(info.get("total") or {}),
        )
        for name, info in stats.items()
    }
    if workers:
        # Only the workers that just answered, and no longer than until each has.
        inspect = app.control.inspect(
            destination=list(workers),
            limit=len(workers),
            timeout=INSPECT_TIMEOUT_SECONDS,
            connection=connection,
        )
        for name, jobs in (inspect.active() or {}).items():
            if name in workers:
                workers[name].active = [_job(j) for j in jobs]
        for name, jobs in (inspect.reserved() or {}).items():
            if name in workers:
                workers[name].reserved = [_job(j) for j in jobs]
        # console.jobstats' own inspect command, asked as Celery asks its built-in ones.
        replies = app.control.broadcast(
            "job_stats",
            reply=True,
            destination=list(workers),
            limit=len(workers),
            timeout=INSPECT_TIMEOUT_SECONDS,
            connection=connection,
        )
        for reply in replies or []:
            for name, stats in reply.items():
                if name in workers and isinstance(stats, dict):
                    workers[name].kinds = dict(sorted((stats.get("kinds") or {}).items()))
    return sorted(workers.values(), key=lambda w: w.hostname)


def _broker_report() -> BrokerReport:
    report = BrokerReport(transport=settings.CELERY_BROKER_URL.partition(":")[0])
    with app.connection_for_write() as connection:
        try:
            connection.ensure_connection(max_retries=1, timeout=BROKER_CONNECT_TIMEOUT_SECONDS)
        except Exception as exc:  # the page says what is wrong instead of failing
            report.unreachable = _describe(exc)
            return report
        try:
            report.depths = queue_depths()
        except Exception as exc:
            report.depths_error = _describe(exc)
        try:
            report.workers = _workers(connection)
        except Exception as exc:
            report.workers_error = _describe(exc)
    return report


def broker_report_bounded(deadline: float = BROKER_DEADLINE_SECONDS) -> BrokerReport:
    """The broker report, or after `deadline` seconds a report that says it did not come."""
    try:
        return within(deadline, _broker_report)
    except TimeoutError:
        return BrokerReport(
            transport=settings.CELERY_BROKER_URL.partition(":")[0],
            unreachable=f"no answer from the broker within {deadline:g} s",
        )


def _beat_report() -> dict[str, Any]:
    """When beat last ticked, and whether that is recent enough (a2a_platform.beat)."""
    stale_after = beat_stale_after_seconds()
    try:
        last = beat_last_tick()
    except DatabaseError as exc:  # the page says what is wrong instead of failing
        return {"error": _describe(exc), "alive": False, "stale_after": stale_after}
    age = (timezone.now() - last).total_seconds() if last else None
    return {
        "last": last,
        "age_seconds": age,
        "stale_after": stale_after,
        "alive": age is not None and age <= stale_after,
    }


@login_required
def workers(request: HttpRequest) -> HttpResponse:
    require_operator(request.user)
    report = broker_report_bounded()
    failures = list(JobFailure.objects.order_by("-failed_at", "-id")[:JOB_FAILURES_SHOWN])
    return render(
        request,
        "console/workers.html",
        {
            "report": report,
            "beat": _beat_report(),
            "failures": failures,
            "failures_shown": JOB_FAILURES_SHOWN,
            "inspect_timeout": INSPECT_TIMEOUT_SECONDS,
            "run_job": RUN_JOB,
        },
    )


# An agent run's job: revoking it would not stop the run (the reaper queues a waiting task's
# run again), so the page offers to cancel the task instead.
RUN_JOB = "tasks_app.tasks.run_agent_task"


@login_required
@require_POST
def job_revoke(request: HttpRequest) -> HttpResponse:
    """Revoke a job by id on every live worker: one that has not started is skipped when its
    turn comes; one already running finishes (thread pools cannot stop a job midway)."""
    require_operator(request.user)
    job_id = request.POST.get("job", "").strip()
    try:
        uuid.UUID(job_id)
    except ValueError:
        messages.error(request, f"Not revoked: {job_id[:80]!r} is not a job id.")
        return redirect("console:workers")
    try:
        within(BROKER_DEADLINE_SECONDS, lambda: app.control.revoke(job_id))
    except Exception as exc:  # the broker is down or slow: say so on the page
        messages.error(request, f"Not revoked: the broker did not take it ({_describe(exc)}).")
    else:
        messages.success(
            request,
            f"Job {job_id} revoked: live workers skip it if it has not started; one already "
            "running finishes.",
        )
    return redirect("console:workers")


# --- push deliveries ---------------------------------------------------------------------

DELIVERIES_PER_PAGE = 50
ATTEMPTS_SHOWN = 200
STATES = [state for state, _ in Delivery.State.choices]


def _agent_filter(user: User, value: str) -> Agent | None:
    """`<tenant>/<agent>` from a filter; another tenant's agent is 404, like a missing one."""
    return agent_from_path(user, value) if value else None


@login_required
def deliveries(request: HttpRequest) -> HttpResponse:
    agent = _agent_filter(request.user, request.GET.get("agent", "").strip())
    rows = visible_deliveries(request.user)
    if agent is not None:
        rows = rows.filter(config__task__agent=agent)
    by_state = {
        row["state"]: row["n"] for row in rows.order_by().values("state").annotate(n=Count("id"))
    }
    state = request.GET.get("state", "")
    if state in STATES:
        rows = rows.filter(state=state)
    else:
        state = ""
    rows = rows.select_related("config__task__tenant", "config__task__agent").order_by(
        "-created_at", "-id"
    )
    page = Paginator(rows, DELIVERIES_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "console/deliveries.html",
        {
            "page": page,
            "state": state,
            "agent_value": agent_path(agent) if agent else "",
            "agent_choices": agent_paths(request.user),
            "counts": [(s, by_state.get(s, 0)) for s in STATES],
            "total": sum(by_state.values()),
        },
    )


@login_required
def delivery_detail(request: HttpRequest, delivery_id: uuid.UUID) -> HttpResponse:
    delivery = delivery_or_404(request.user, delivery_id)
    tenant = delivery.config.task.tenant
    attempts = list(delivery.attempts_log.order_by("-started_at", "-id")[:ATTEMPTS_SHOWN])
    return render(
        request,
        "console/delivery.html",
        {
            "delivery": delivery,
            "task": delivery.config.task,
            "tenant": tenant,
            "attempts": attempts,
            "attempts_shown": ATTEMPTS_SHOWN,
            "can_manage": can_manage(request.user, tenant),
        },
    )


@login_required
@require_POST
def delivery_redeliver_view(request: HttpRequest, delivery_id: uuid.UUID) -> HttpResponse:
    delivery = delivery_or_404(request.user, delivery_id)
    require_manager(request.user, delivery.config.task.tenant)
    if delivery_redeliver(delivery_id=delivery.pk):
        messages.success(request, "Delivery queued again; its new attempts appear below.")
    else:
        messages.warning(
            request,
            f"Only dead deliveries are redelivered; this one is {delivery.state}. Nothing done.",
        )
    return redirect("console:delivery", delivery_id=delivery.pk)


# --- charts ------------------------------------------------------------------------------

ERROR_STATES = ("TASK_STATE_FAILED", "TASK_STATE_REJECTED")
# Charts drawn at most (the busiest agents in the range), and durations read at most: each
# agent's bucket reads a share of them, sampled by task id (random UUIDs) when it has more.
MAX_AGENTS_CHARTED = 12
MAX_DURATION_ROWS = 50_000
MIN_DURATIONS_PER_BUCKET = 50


def _bucket_case(field_name: str, buckets: charts.Buckets) -> Case:
    """The bucket index of a timestamp, computed by the database (any backend)."""
    return Case(
        *[
            When(**{f"{field_name}__lt": edge}, then=Value(i))
            for i, edge in enumerate(buckets.edges()[1:])
        ],
        default=Value(None),
        output_field=IntegerField(),
    )


@dataclass
class AgentChart:
    agent: Agent
    series: charts.AgentSeries
    created_total: int
    finished_total: int
    errors_total: int
    error_rate: float | None
    latency: list[tuple[str, str]]  # ("p50", "1.20 s") over the whole range
    sampled: bool
    svgs: list[SafeString] = field(default_factory=list)


def _task_stats(
    tasks: QuerySet[Task], agent_ids: list[int], buckets: charts.Buckets
) -> dict[int, dict[str, Any]]:
    """Per agent and bucket: tasks created, finished, failed or rejected, and (a bounded
    sample of) the finished ones' durations in seconds."""
    n = buckets.count
    stats: dict[int, dict[str, Any]] = {
        pk: {
            "created": [0] * n,
            "finished": [0] * n,
            "errors": [0] * n,
            "durations": [[] for _ in range(n)],
        }
        for pk in agent_ids
    }
    created = (
        tasks.filter(agent_id__in=agent_ids, created_at__gte=buckets.start)
        .filter(created_at__lt=buckets.end)
        .annotate(bucket=_bucket_case("created_at", buckets))
        .order_by()
        .values("agent_id", "bucket")
        .annotate(n=Count("id"))
    )
    for row in created:
        stats[row["agent_id"]]["created"][row["bucket"]] = row["n"]
    finished = (
        tasks.filter(agent_id__in=agent_ids, state__in=sorted(TERMINAL_STATES))
        .filter(status_timestamp__gte=buckets.start, status_timestamp__lt=buckets.end)
        .annotate(bucket=_bucket_case("status_timestamp", buckets))
        .order_by()
    )
    for row in finished.values("agent_id", "bucket").annotate(
        n=Count("id"), errors=Count("id", filter=Q(state__in=ERROR_STATES))
    ):
        stats[row["agent_id"]]["finished"][row["bucket"]] = row["n"]
        stats[row["agent_id"]]["errors"][row["bucket"]] = row["errors"]
    per_bucket = max(MIN_DURATIONS_PER_BUCKET, MAX_DURATION_ROWS // max(len(agent_ids) * n, 1))
    durations = (
        finished.annotate(
            duration=ExpressionWrapper(
                F("status_timestamp") - F("created_at"), output_field=DurationField()
            ),
            # Task ids are random UUIDs: the first ones by id are a fair sample.
            rank=Window(RowNumber(), partition_by=[F("agent_id"), F("bucket")], order_by="id"),
        )
        .filter(rank__lte=per_bucket)
        .values_list("agent_id", "bucket", "duration")
    )
    for agent_id, bucket, duration in durations:
        stats[agent_id]["durations"][bucket].append(max(duration.total_seconds(), 0.0))
    return stats


def _agent_chart(agent: Agent, stats: dict[str, Any], labels: list[str]) -> AgentChart:
    series = charts.agent_series(**stats)
    every = [d for bucket in stats["durations"] for d in bucket]
    finished, errors = sum(series.finished), sum(series.errors)
    chart = AgentChart(
        agent=agent,
        series=series,
        created_total=sum(series.created),
        finished_total=finished,
        errors_total=errors,
        error_rate=charts.error_rate(errors, finished),
        latency=[
            (f"p{q}", "–" if value is None else charts.format_seconds(value))
            for q in charts.PERCENTILES
            for value in [charts.percentile(every, q)]
        ],
        sampled=any(series.sampled),
    )
    name = agent_path(agent)
    # Each SVG is built by console.charts, which escapes every text it writes.
    chart.svgs = [
        mark_safe(
            charts.bar_chart(
                title=f"{name}: tasks created",
                x_labels=labels,
                values=series.created,
                y_label="tasks",
                name="created",
            )
        ),
        mark_safe(
            charts.line_chart(
                title=f"{name}: latency, created to finished",
                x_labels=labels,
                series=[charts.Series(f"p{q}", series.latency[q]) for q in charts.PERCENTILES],
                y_label="seconds",
                fmt=charts.format_seconds,
            )
        ),
        mark_safe(
            charts.line_chart(
                title=f"{name}: error rate (failed + rejected of finished)",
                x_labels=labels,
                series=[charts.Series("error rate", series.error_rate)],
                y_label="percent",
                fmt=charts.format_percent,
            )
        ),
    ]
    return chart


def _duration_text(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds < 3600 else f"{seconds / 3600:g} h"


@login_required
def charts_page(request: HttpRequest) -> HttpResponse:
    range_key = request.GET.get("range", charts.DEFAULT_RANGE)
    if range_key not in charts.RANGES:
        range_key = charts.DEFAULT_RANGE
    agent = _agent_filter(request.user, request.GET.get("agent", "").strip())
    buckets = charts.buckets_for(range_key, timezone.now())
    tasks = visible_tasks(request.user)
    if agent is not None:
        agent_ids = [agent.pk]
    else:
        # status_timestamp >= created_at: a task created or finished in the range has its
        # status_timestamp in it.
        busiest = (
            tasks.filter(status_timestamp__gte=buckets.start)
            .order_by()
            .values("agent_id")
            .annotate(n=Count("id"))
            .order_by("-n", "agent_id")[: MAX_AGENTS_CHARTED + 1]
        )
        agent_ids = [row["agent_id"] for row in busiest]
    more = len(agent_ids) > MAX_AGENTS_CHARTED
    agent_ids = agent_ids[:MAX_AGENTS_CHARTED]
    agents = {a.pk: a for a in visible_agents(request.user).filter(pk__in=agent_ids)}
    stats = _task_stats(tasks, agent_ids, buckets) if agent_ids else {}
    labels = buckets.labels(timezone.get_current_timezone())
    agent_charts = [_agent_chart(agents[pk], stats[pk], labels) for pk in agent_ids]
    return render(
        request,
        "console/charts.html",
        {
            "charts": agent_charts,
            "range_key": range_key,
            "ranges": list(charts.RANGES),
            "buckets": buckets,
            "bucket_size": _duration_text(buckets.size.total_seconds()),
            "agent_value": agent_path(agent) if agent else "",
            "agent_choices": agent_paths(request.user),
            "more_agents": more,
            "max_agents": MAX_AGENTS_CHARTED,
            "percentiles": charts.PERCENTILES,
        },
    )
