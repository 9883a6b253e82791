"""Reads of the console: who sees what (staff operators see every tenant; anyone else the active
tenants they belong to, and an object of any other tenant is 404, exactly like one that does not
exist), and the rows, counts, chart numbers and broker state each page shows. Every read of a
page starts from the scopes here, so scoping lives in one place."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from celery.utils.saferepr import saferepr
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.paginator import Page, Paginator
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
from django.http import Http404
from django.utils import timezone

from a2a_platform.beat import beat_last_tick, beat_stale_after_seconds
from a2a_platform.celery import app
from a2a_platform.queues import queue_depths, within
from agents.models import Agent, ApiKey, Issuer, Membership, Tenant
from audit.models import AuditEvent
from push_app.models import Delivery, DeliveryAttempt
from tasks_app.models import STATE_CHOICES, TERMINAL_STATES, Artifact, Message, Task, TaskEvent
from tasks_app.selectors import task_page_after, task_page_token

from .charts import Buckets
from .models import JobFailure

User = AbstractBaseUser | AnonymousUser

# --- scopes: what a user may see ---------------------------------------------------------------


def tenant_scope(*, user: User) -> QuerySet[Tenant]:
    if not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if user.is_staff:
        return Tenant.objects.all()
    # A deactivated tenant is closed on the A2A endpoints; its people no longer see it either.
    return Tenant.objects.filter(memberships__user=user, is_active=True).distinct()


def agent_scope(*, user: User) -> QuerySet[Agent]:
    return Agent.objects.filter(tenant__in=tenant_scope(user=user)).select_related("tenant")


def task_scope(*, user: User) -> QuerySet[Task]:
    return Task.objects.filter(tenant__in=tenant_scope(user=user))


def delivery_scope(*, user: User) -> QuerySet[Delivery]:
    return Delivery.objects.filter(config__task__tenant__in=tenant_scope(user=user))


def tenant_get_or_404(*, user: User, tenant_slug: str) -> Tenant:
    tenant = tenant_scope(user=user).filter(slug=tenant_slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    return tenant


def agent_get_or_404(*, user: User, tenant_slug: str, agent_slug: str) -> Agent:
    agent = agent_scope(user=user).filter(tenant__slug=tenant_slug, slug=agent_slug).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


_SLUG = re.compile(r"[a-z0-9-]{1,63}")


def agent_path(agent: Agent) -> str:
    """How pages name an agent in filters and links: `<tenant>/<agent>`."""
    return f"{agent.tenant.slug}/{agent.slug}"


def agent_list(*, user: User) -> list[Agent]:
    """The agents the user may see, in the order filters list them."""
    return list(agent_scope(user=user).order_by("tenant__slug", "slug"))


def agent_path_list(*, user: User, limit: int = 500) -> list[str]:
    """The agents a filter may name, for its choices."""
    rows = (
        agent_scope(user=user).order_by("tenant__slug", "slug").values_list("tenant__slug", "slug")
    )
    return [f"{tenant}/{slug}" for tenant, slug in rows[:limit]]


def agent_get_by_path_or_404(*, user: User, path: str) -> Agent:
    """The agent a `<tenant>/<agent>` filter names; 404 for anything else, malformed included."""
    tenant_slug, _, agent_slug = path.partition("/")
    if not (_SLUG.fullmatch(tenant_slug) and _SLUG.fullmatch(agent_slug)):
        raise Http404("No such agent.")
    return agent_get_or_404(user=user, tenant_slug=tenant_slug, agent_slug=agent_slug)


def delivery_get_or_404(*, user: User, delivery_id: uuid.UUID) -> Delivery:
    delivery = (
        delivery_scope(user=user)
        .select_related("config__task__tenant", "config__task__agent", "event")
        .filter(pk=delivery_id)
        .first()
    )
    if delivery is None:
        raise Http404("No such delivery.")
    return delivery


def task_get_or_404(*, user: User, tenant_slug: str, task_id: str) -> Task:
    try:
        pk = uuid.UUID(task_id)
    except ValueError as exc:  # a malformed id is a URL to nothing, like any other
        raise Http404("No such task.") from exc
    task = (
        task_scope(user=user)
        .select_related("agent__tenant", "tenant")
        .filter(tenant__slug=tenant_slug, pk=pk)
        .first()
    )
    if task is None:
        raise Http404("No such task.")
    return task


def membership_role(*, user: User, tenant: Tenant) -> str:
    """'operator' for staff, else the membership's role ('' when none)."""
    if user.is_authenticated and user.is_staff:
        return "operator"
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    return membership.role if membership else ""


def tenants_owned(*, user: User, tenants: list[Tenant]) -> list[Tenant]:
    """Those of `tenants` the user (not staff) owns, in one query."""
    owned = set(
        Membership.objects.filter(
            user=user, role=Membership.Role.OWNER, tenant__in=tenants
        ).values_list("tenant_id", flat=True)
    )
    return [t for t in tenants if t.pk in owned]


# --- the audit log: members read their tenants' log, owners also where it came from -----------


def audit_scope(*, user: User) -> QuerySet[AuditEvent]:
    """The events the user may read: an operator every one (the platform's own, with no
    tenant, included); anyone else those of the tenants they see (tenant_scope)."""
    if not user.is_authenticated or not user.is_active:
        return AuditEvent.objects.none()
    if user.is_staff:
        return AuditEvent.objects.all()
    return AuditEvent.objects.filter(tenant_id__in=tenant_scope(user=user).values("pk"))


def audit_owned_tenant_ids(*, user: User) -> set[int]:
    """The tenants whose events the user (not staff) reads whole, addresses included, and
    exports: those they own (and see)."""
    if not user.is_authenticated or not user.is_active or user.is_staff:
        return set()
    return set(
        tenant_scope(user=user)
        .filter(memberships__user=user, memberships__role=Membership.Role.OWNER)
        .values_list("pk", flat=True)
    )


def audit_export_scope(*, user: User) -> QuerySet[AuditEvent]:
    """The events the user may export: an operator every one, an owner their tenants'."""
    if user.is_authenticated and user.is_active and user.is_staff:
        return AuditEvent.objects.all()
    return AuditEvent.objects.filter(tenant_id__in=audit_owned_tenant_ids(user=user))


# --- the overview and an agent's page ----------------------------------------------------------


class Overview(TypedDict):
    tenants: list[Tenant]
    agents: list[Agent]  # each with `state_counts` [(state, n)] and `n`, its tasks in all
    managed_tenants: list[Tenant]


def overview_get(*, user: User) -> Overview:
    """The tenants and agents the user sees, each agent with its tasks counted by state, and
    the tenants the user may register agents in."""
    tenants = list(tenant_scope(user=user).order_by("slug"))
    agents = list(agent_scope(user=user).order_by("tenant__slug", "slug"))
    counts: dict[int, dict[str, int]] = {}
    rows = (
        agent_scope(user=user)
        .values("pk", "tasks__state")
        .annotate(n=Count("tasks"))
        .filter(n__gt=0)
    )
    for row in rows:
        counts.setdefault(row["pk"], {})[row["tasks__state"]] = row["n"]
    for agent in agents:
        agent.state_counts = sorted(counts.get(agent.pk, {}).items())  # type: ignore[attr-defined]
        agent.n = sum(counts.get(agent.pk, {}).values())  # type: ignore[attr-defined]
    managed = tenants if user.is_staff else tenants_owned(user=user, tenants=tenants)
    return {"tenants": tenants, "agents": agents, "managed_tenants": managed}


def api_key_list(*, agent: Agent) -> list[ApiKey]:
    """The active keys that work for the agent: the tenant's, and its own; newest first."""
    return list(
        ApiKey.objects.filter(
            Q(agent__isnull=True) | Q(agent=agent), tenant=agent.tenant, revoked_at__isnull=True
        ).order_by("-created_at")
    )


# --- the people of a tenant --------------------------------------------------------------------


def membership_list(*, tenant: Tenant) -> list[Membership]:
    return list(tenant.memberships.select_related("user").order_by("user__username"))


def membership_get_or_404(*, tenant: Tenant, membership_id: int) -> Membership:
    found = (
        Membership.objects.select_related("user", "tenant")
        .filter(tenant=tenant, pk=membership_id)
        .first()
    )
    if found is None:
        raise Http404("No such person in this tenant.")
    return found


def issuer_list(*, tenant: Tenant) -> list[Issuer]:
    """The tenant's own token issuers, active and not, oldest first."""
    return list(Issuer.objects.filter(tenant=tenant).order_by("created_at", "pk"))


def issuer_platform_list() -> list[Issuer]:
    """The operator's issuers, trusted at every tenant: the active ones (an inactive one
    trusts nobody, and is the operator's business)."""
    return list(Issuer.objects.filter(tenant__isnull=True, is_active=True).order_by("created_at"))


def issuer_get_or_404(*, tenant: Tenant, issuer_id: int) -> Issuer:
    """One of the tenant's own issuers; a platform-wide one is the operator's, never changed
    from a tenant's page, so it is 404 here like another tenant's."""
    found = Issuer.objects.filter(tenant=tenant, pk=issuer_id).first()
    if found is None:
        raise Http404("No such token issuer in this tenant.")
    return found


# --- tasks -------------------------------------------------------------------------------------


class TaskPage(TypedDict):
    tasks: list[Task]
    next_after: str  # the `after` of the next page; '' on the last one


def task_page_get(
    *,
    user: User,
    agent: Agent | None = None,
    state: str = "",
    context_id: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
    after: str = "",
    size: int,
) -> TaskPage:
    """A page of the tasks the user sees, newest status first, after the task the `after`
    token names (tasks_app.selectors' ListTasks page token). InvalidParamsError for a token
    this server did not issue."""
    tasks = task_scope(user=user)
    if agent is not None:
        tasks = tasks.filter(agent=agent)
    if state:
        tasks = tasks.filter(state=state)
    if context_id:
        tasks = tasks.filter(context_id=context_id)
    if since:
        tasks = tasks.filter(status_timestamp__gte=since)
    if until:
        tasks = tasks.filter(status_timestamp__lt=until)
    tasks = tasks.select_related("agent", "tenant")
    if after:
        tasks = task_page_after(tasks=tasks, page_token=after)
    page = list(tasks.order_by("-status_timestamp", "-id")[: size + 1])
    if len(page) <= size:
        return {"tasks": page, "next_after": ""}
    page = page[:size]
    return {"tasks": page, "next_after": task_page_token(task=page[-1])}


def task_state_counts(*, user: User, agent: Agent | None = None) -> list[tuple[str, int]]:
    """How many tasks the user sees in each state (of one agent when given), states that have
    none left out, in the order of STATE_CHOICES."""
    tasks = task_scope(user=user)
    if agent is not None:
        tasks = tasks.filter(agent=agent)
    rows = dict(tasks.order_by().values_list("state").annotate(n=Count("pk")))
    return [(state, rows[state]) for state, _ in STATE_CHOICES if rows.get(state)]


class TaskDetail(TypedDict):
    messages: list[Message]
    artifacts: list[Artifact]
    events: list[TaskEvent]  # the newest ones, oldest first


def task_detail_get(*, task: Task, events_shown: int) -> TaskDetail:
    """A task's history, artifacts, and its newest `events_shown` events."""
    return {
        "messages": list(task.messages.all()),
        "artifacts": list(task.artifacts.all()),
        "events": list(task.events.order_by("-seq")[:events_shown])[::-1],
    }


def task_action_list(*, task: Task, limit: int) -> list[LogEntry]:
    """What people did to the task from the console (console.services.task_action_record),
    the newest `limit` records, oldest first, each with its user."""
    # The content type by its name, not from ContentType's per-process cache (see
    # console.services.task_content_type).
    rows = (
        LogEntry.objects.filter(
            content_type__app_label=Task._meta.app_label,
            content_type__model=Task._meta.model_name,
            object_id=str(task.pk),
        )
        .select_related("user")
        .order_by("-action_time", "-id")[:limit]
    )
    return list(rows)[::-1]


EventRow = tuple[int, str, str, datetime, Any]


def task_event_rows(*, task_id: uuid.UUID, from_seq: int, limit: int = 100) -> list[EventRow]:
    """(seq, kind, state, created_at, data) of the task's events from `from_seq` on, in order."""
    return list(
        TaskEvent.objects.filter(task_id=task_id, seq__gte=from_seq)
        .order_by("seq")
        .values_list("seq", "kind", "state", "created_at", "data")[:limit]
    )


# --- workers and queues: the broker, beat, and failed jobs -------------------------------------

# How long workers get to answer a broadcast. Celery waits the whole timeout for the first
# one (it cannot know how many workers there are); the next ones stop at the known count.
INSPECT_TIMEOUT_SECONDS = 1.0
BROKER_CONNECT_TIMEOUT_SECONDS = 2.0
# The whole broker part of the page, whatever hangs (a blackholed broker host has no socket
# timeout): past this the page is rendered without it. It covers the connection and four
# broadcasts (stats, active, reserved, job_stats) of up to INSPECT_TIMEOUT_SECONDS each.
BROKER_DEADLINE_SECONDS = 8.0
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


def error_text(exc: BaseException) -> str:
    """An exception as a page shows it: its type and the start of its message."""
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


def _broker_transport() -> str:
    return str(settings.CELERY_BROKER_URL.partition(":")[0])


def _broker_report() -> BrokerReport:
    report = BrokerReport(transport=_broker_transport())
    with app.connection_for_write() as connection:
        try:
            connection.ensure_connection(max_retries=1, timeout=BROKER_CONNECT_TIMEOUT_SECONDS)
        except Exception as exc:  # the page says what is wrong instead of failing
            report.unreachable = error_text(exc)
            return report
        try:
            report.depths = queue_depths()
        except Exception as exc:
            report.depths_error = error_text(exc)
        try:
            report.workers = _workers(connection)
        except Exception as exc:
            report.workers_error = error_text(exc)
    return report


def broker_report_get(*, deadline: float = BROKER_DEADLINE_SECONDS) -> BrokerReport:
    """The queues' depths and the live workers with their jobs, or after `deadline` seconds a
    report that says it did not come."""
    try:
        return within(deadline, _broker_report)
    except TimeoutError:
        return BrokerReport(
            transport=_broker_transport(),
            unreachable=f"no answer from the broker within {deadline:g} s",
        )


class BeatStatus(TypedDict, total=False):
    last: datetime | None
    age_seconds: float | None
    stale_after: float
    alive: bool
    error: str


def beat_status_get() -> BeatStatus:
    """When beat last ticked, and whether that is recent enough (a2a_platform.beat)."""
    stale_after = beat_stale_after_seconds()
    try:
        last = beat_last_tick()
    except DatabaseError as exc:  # the page says what is wrong instead of failing
        return {"error": error_text(exc), "alive": False, "stale_after": stale_after}
    age = (timezone.now() - last).total_seconds() if last else None
    return {
        "last": last,
        "age_seconds": age,
        "stale_after": stale_after,
        "alive": age is not None and age <= stale_after,
    }


def job_failure_list(*, limit: int) -> list[JobFailure]:
    """The newest failed jobs the workers recorded (console.signals)."""
    return list(JobFailure.objects.order_by("-failed_at", "-id")[:limit])


# --- push deliveries ---------------------------------------------------------------------------

DELIVERY_STATES = [state for state, _ in Delivery.State.choices]


class DeliveryPage(TypedDict):
    page: Page
    counts: list[tuple[str, int]]  # every state, 0 included, in DELIVERY_STATES order
    total: int


def delivery_page_get(
    *, user: User, agent: Agent | None, state: str, page_number: Any, per_page: int
) -> DeliveryPage:
    """A page of the deliveries the user sees (of one agent, in one state, when given), newest
    first, and how many there are in each state (whatever `state`)."""
    rows = delivery_scope(user=user)
    if agent is not None:
        rows = rows.filter(config__task__agent=agent)
    by_state = {
        row["state"]: row["n"] for row in rows.order_by().values("state").annotate(n=Count("id"))
    }
    if state:
        rows = rows.filter(state=state)
    rows = rows.select_related("config__task__tenant", "config__task__agent").order_by(
        "-created_at", "-id"
    )
    page = Paginator(rows, per_page).get_page(page_number)
    page.object_list = list(page.object_list)  # read here, not while the page renders
    return {
        "page": page,
        "counts": [(s, by_state.get(s, 0)) for s in DELIVERY_STATES],
        "total": sum(by_state.values()),
    }


def delivery_attempt_list(*, delivery: Delivery, limit: int) -> list[DeliveryAttempt]:
    """The delivery's newest `limit` attempts, newest first."""
    return list(delivery.attempts_log.order_by("-started_at", "-id")[:limit])


# --- charts ------------------------------------------------------------------------------------

ERROR_STATES = ("TASK_STATE_FAILED", "TASK_STATE_REJECTED")


class AgentStats(TypedDict):
    """One agent's numbers per bucket, as console.charts.agent_series takes them."""

    created: list[int]
    finished: list[int]
    errors: list[int]
    durations: list[list[float]]  # seconds, a bounded sample of the finished tasks


@dataclass(frozen=True)
class ChartData:
    agents: list[Agent]  # the agents charted, busiest first (or the one asked for)
    stats: dict[int, AgentStats]  # by agent pk
    more: bool  # more agents were busy in the range than were charted


def _bucket_case(field_name: str, buckets: Buckets) -> Case:
    """The bucket index of a timestamp, computed by the database (any backend)."""
    return Case(
        *[
            When(**{f"{field_name}__lt": edge}, then=Value(i))
            for i, edge in enumerate(buckets.edges()[1:])
        ],
        default=Value(None),
        output_field=IntegerField(),
    )


def _task_stats(
    tasks: QuerySet[Task],
    agent_ids: list[int],
    buckets: Buckets,
    *,
    max_duration_rows: int,
    min_durations_per_bucket: int,
) -> dict[int, AgentStats]:
    """Per agent and bucket: tasks created, finished, failed or rejected, and (a bounded
    sample of) the finished ones' durations in seconds."""
    n = buckets.count
    stats: dict[int, AgentStats] = {
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
    per_bucket = max(min_durations_per_bucket, max_duration_rows // max(len(agent_ids) * n, 1))
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


def chart_data_get(
    *,
    user: User,
    agent: Agent | None,
    buckets: Buckets,
    max_agents: int,
    max_duration_rows: int,
    min_durations_per_bucket: int,
) -> ChartData:
    """The numbers behind the charts: for `agent`, or else for the (at most `max_agents`)
    agents the user sees with the most tasks in the range, per bucket; each agent's bucket
    reads a share of `max_duration_rows` durations, at least `min_durations_per_bucket`."""
    tasks = task_scope(user=user)
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
            .order_by("-n", "agent_id")[: max_agents + 1]
        )
        agent_ids = [row["agent_id"] for row in busiest]
    more = len(agent_ids) > max_agents
    agent_ids = agent_ids[:max_agents]
    agents = {a.pk: a for a in agent_scope(user=user).filter(pk__in=agent_ids)}
    stats = (
        _task_stats(
            tasks,
            agent_ids,
            buckets,
            max_duration_rows=max_duration_rows,
            min_durations_per_bucket=min_durations_per_bucket,
        )
        if agent_ids
        else {}
    )
    return ChartData(agents=[agents[pk] for pk in agent_ids], stats=stats, more=more)
