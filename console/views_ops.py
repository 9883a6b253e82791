"""Console pages for running the platform: Celery workers and queues (operators only), the push
delivery outbox with redelivery, and per-agent charts of throughput, latency and errors."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_POST

from agents.models import Agent
from push_app.delivery import delivery_redeliver

from . import charts
from .scoping import can_manage, require_manager, require_operator
from .selectors import (
    DELIVERY_STATES,
    INSPECT_TIMEOUT_SECONDS,
    AgentStats,
    User,
    agent_get_by_path_or_404,
    agent_path,
    agent_path_list,
    beat_status_get,
    broker_report_get,
    chart_data_get,
    delivery_attempt_list,
    delivery_get_or_404,
    delivery_page_get,
    error_text,
    job_failure_list,
)
from .services import job_revoke

# --- workers -----------------------------------------------------------------------------

JOB_FAILURES_SHOWN = 50


@login_required
def workers(request: HttpRequest) -> HttpResponse:
    require_operator(request.user)
    return render(
        request,
        "console/workers.html",
        {
            "report": broker_report_get(),
            "beat": beat_status_get(),
            "failures": job_failure_list(limit=JOB_FAILURES_SHOWN),
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
def job_revoke_view(request: HttpRequest) -> HttpResponse:
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
        job_revoke(job_id=job_id)
    except Exception as exc:  # the broker is down or slow: say so on the page
        messages.error(request, f"Not revoked: the broker did not take it ({error_text(exc)}).")
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
# A bad filter value is repeated in the message that explains it, cut to this many characters.
ECHOED_VALUE_LENGTH = 40


def _agent_filter(user: User, value: str) -> Agent | None:
    """`<tenant>/<agent>` from a filter; another tenant's agent is 404, like a missing one."""
    return agent_get_by_path_or_404(user=user, path=value) if value else None


def _state_problems(value: str) -> list[str]:
    """Why `value` cannot filter deliveries by state, as the task list says it of its filters:
    one line naming the field as the page and its URL do; none for a state or no value."""
    if not value or value in DELIVERY_STATES:
        return []
    shown = value if len(value) <= ECHOED_VALUE_LENGTH else value[:ECHOED_VALUE_LENGTH] + "…"
    return [
        f"State (state): {shown} is not a delivery state; pick one from the list "
        f"({', '.join(DELIVERY_STATES)})."
    ]


@login_required
def deliveries(request: HttpRequest) -> HttpResponse:
    agent = _agent_filter(request.user, request.GET.get("agent", "").strip())
    state = request.GET.get("state", "")
    problems = _state_problems(state)
    if problems:
        state = ""  # the counts by state stay; the table shows nothing, not every delivery
    found = delivery_page_get(
        user=request.user,
        agent=agent,
        state=state,
        page_number=request.GET.get("page"),
        per_page=DELIVERIES_PER_PAGE,
    )
    return render(
        request,
        "console/deliveries.html",
        {
            **found,
            "state": state,
            "problems": problems,
            "agent_value": agent_path(agent) if agent else "",
            "agent_choices": agent_path_list(user=request.user),
        },
    )


@login_required
def delivery_detail(request: HttpRequest, delivery_id: uuid.UUID) -> HttpResponse:
    delivery = delivery_get_or_404(user=request.user, delivery_id=delivery_id)
    tenant = delivery.config.task.tenant
    attempts = delivery_attempt_list(delivery=delivery, limit=ATTEMPTS_SHOWN)
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
    delivery = delivery_get_or_404(user=request.user, delivery_id=delivery_id)
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

# Charts drawn at most (the busiest agents in the range), and durations read at most: each
# agent's bucket reads a share of them, sampled by task id (random UUIDs) when it has more.
MAX_AGENTS_CHARTED = 12
MAX_DURATION_ROWS = 50_000
MIN_DURATIONS_PER_BUCKET = 50


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


def _agent_chart(agent: Agent, stats: AgentStats, labels: list[str]) -> AgentChart:
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
            charts.latency_chart(
                title=f"{name}: latency, created to finished",
                x_labels=labels,
                series=[charts.Series(f"p{q}", series.latency[q]) for q in charts.PERCENTILES],
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
    data = chart_data_get(
        user=request.user,
        agent=agent,
        buckets=buckets,
        max_agents=MAX_AGENTS_CHARTED,
        max_duration_rows=MAX_DURATION_ROWS,
        min_durations_per_bucket=MIN_DURATIONS_PER_BUCKET,
    )
    labels = buckets.labels(timezone.get_current_timezone())
    agent_charts = [_agent_chart(a, data.stats[a.pk], labels) for a in data.agents]
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
            "agent_choices": agent_path_list(user=request.user),
            "more_agents": data.more,
            "max_agents": MAX_AGENTS_CHARTED,
            "percentiles": charts.PERCENTILES,
        },
    )
