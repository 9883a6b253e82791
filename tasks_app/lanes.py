"""Run lanes: each tenant's runs reach the workers through a lane of its own, so while
tenants compete one tenant's backlog does not stand in the broker's queue in front of another
tenant's runs.

A run is *in flight* while its job is handed to the broker or a worker runs it: its task has
`running_since` set, or a `job_id` that is not `held`. While another tenant has sent within
A2A_LANE_CONTENTION_SECONDS (as every process that serves sends tells the others,
`Contention`), a tenant has at most its *window* of runs in flight: `A2A_LANE_WINDOW` times its
plan's weight. A tenant alone has the workers to itself, as without lanes. A `running_runs`
(and, per agent, `agent_running_runs`) limit always holds. A send past the window is stored as
usual, its task `submitted`, and waits in the lane (`Task.held`, in PostgreSQL) instead of the
broker. As a run of the tenant ends, the worker hands the lane's oldest waiting run to the
broker (`promote`) if runs waited as it ended (or the tenant has a cap); the reaper's round
refills every lane that has room (`lanes_refill`), so a hand-over lost with a process is made
later, not never.

So while tenants compete the broker's queue holds at most a window of each tenant's runs
sent since (what a tenant queued while it was alone is worked off first), and a tenant with
nothing queued gets its run started as soon as a worker has a free slot, however long another
tenant's lane is. With several tenants waiting, each hands over one run as one of its own ends:
the workers are shared in proportion to the windows (the plans' weights).

PostgreSQL is the truth: the lanes survive restarts of every process and hold with many web
processes and workers. The window alone is a share, not a limit, and is counted without a lock.
A `running_runs` or `agent_running_runs` limit is exact: a tenant with one has every run join
its lane, and runs start only through hand-overs, which take a transaction-level advisory lock
on the tenant for one statement and its commit, so no two decide on the same count (SQLite, the
embedded profile's single writer, needs none). `queued_runs` and the quotas are checked before
a send writes, without a lock.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time as clock
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any, NoReturn

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import Q, Sum
from django.utils import timezone

from agents import usage
from agents.cache import call_limits, tenant_agent_caps
from agents.errors import LimitExceeded
from agents.models import Agent
from agents.plans import Limits

from . import rowsql
from .models import IN_FLIGHT, TERMINAL_STATES, Task, TaskCount

logger = logging.getLogger(__name__)
# The advisory lock's key space: the tenant's id in the low bits, this tag above them.
_LOCK_TAG = 0x1A2E << 40


@dataclass(frozen=True)
class Lane:
    """The lane of one tenant, as a call to one of its agents sees it."""

    tenant_id: int
    agent_id: int
    limits: Limits

    @classmethod
    def of(cls, agent: Agent, key_limits: Any = ()) -> Lane:
        return cls(agent.tenant_id, agent.pk, call_limits(agent, key_limits))

    @property
    def window(self) -> int:
        """Runs of the tenant in flight at most; 0 for no bound."""
        share = settings.A2A_LANE_WINDOW * max(self.limits.weight, 1)
        caps = [n for n in (share, self.limits.running_runs) if n]
        return min(caps) if caps else 0

    @property
    def exact(self) -> bool:
        """Whether the tenant has a cap on runs at once, which holds exactly: its runs start
        only through hand-overs counted under the tenant's lock."""
        return bool(self.limits.running_runs or self.limits.agent_running_runs)

    @property
    def checked(self) -> bool:
        """Whether a send must be checked before it writes (`send_admit`): a quota, or a cap on
        runs waiting."""
        limits = self.limits
        quotas = limits.stored_tasks or limits.runs_per_day or limits.runs_per_month
        return bool(limits.queued_runs or quotas)

    def note(self, in_flight: int) -> str:
        """Why a run of this lane waits, for its task's status."""
        limits = self.limits
        if limits.running_runs and self.window == limits.running_runs:
            why = f"its limit of {limits.running_runs} runs at once (running_runs)"
        else:
            why = "as many as its agents' limits or its share of the workers allow"
        return (
            f"Waiting to start: this tenant has {in_flight} runs under way, {why}. The run "
            "starts as one of them ends."
        )

    @property
    def on(self) -> bool:
        return bool(self.window or self.limits.agent_running_runs or self.limits.queued_runs)


def lock(tenant_id: int) -> None:
    """Serialize the lane decisions of one tenant until the transaction ends (PostgreSQL)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_TAG | tenant_id])


@functools.cache
def _in_flight_sql() -> str:
    """How many runs of a tenant are in flight, counting no further than a limit: the
    `task_in_flight` index's range, its predicate (models.IN_FLIGHT) written as Django writes
    it, so PostgreSQL sees the query is within the index."""
    table, c = rowsql.names(Task)
    return (
        f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {c['tenant']} = %s AND "
        f"({c['running_since']} IS NOT NULL OR (NOT ({c['job_id']} = '') AND NOT {c['held']})) "
        "LIMIT %s) AS in_flight"
    )


class Contention:
    """Which tenants sent lately, across the processes that serve sends: a tenant's window (a
    share) applies only while another tenant has sent within A2A_LANE_CONTENTION_SECONDS.

    A process notes each send in memory, and at most once per `SYNC_SECONDS` (the first send
    that finds its view that old) writes when its tenants last sent to the `LaneSender` table
    and reads the latest senders of every process from it: so a tenant seen by another web
    process (its client keeps its connection there) counts here within a second, on both
    profiles, without a write per send. The two most recent senders are enough to tell, in
    constant time: the latest sender other than a tenant is the latest of all, or, if that is
    the tenant itself, the one before it. Shared by the process's database threads; a race
    between them can only make one send's answer a moment stale."""

    SYNC_SECONDS = 1.0

    def __init__(self) -> None:
        self.latest: tuple[int | None, float] = (None, float("-inf"))
        self.before: tuple[int | None, float] = (None, float("-inf"))
        self.unwritten: dict[int, float] = {}  # this process's senders since its last write
        self.synced_at = float("-inf")
        self.syncing = threading.Lock()

    def sent(self, tenant_id: int) -> bool:
        """Note a send of `tenant_id`; whether another tenant sent lately (its window applies)."""
        seconds = settings.A2A_LANE_CONTENTION_SECONDS
        if not seconds:
            return True
        now = clock.time()  # the epoch: compared with other processes' times
        self.unwritten[tenant_id] = now
        self._note(tenant_id, now)
        if now - self.synced_at >= self.SYNC_SECONDS and self.syncing.acquire(blocking=False):
            try:
                self._sync(now, seconds)
            finally:
                self.syncing.release()
        latest, before = self.latest, self.before
        other = before if latest[0] == tenant_id else latest
        return other[0] is not None and now - other[1] < seconds

    def _note(self, tenant_id: int, at: float) -> None:
        latest, before = self.latest, self.before
        if latest[0] == tenant_id:
            self.latest = (tenant_id, max(at, latest[1]))
        elif at >= latest[1]:
            self.before, self.latest = latest, (tenant_id, at)
        elif before[0] == tenant_id or at > before[1]:
            self.before = (tenant_id, max(at, before[1]) if before[0] == tenant_id else at)

    def _sync(self, now: float, seconds: float) -> None:
        """Write this process's senders, and note the latest two of every process's."""
        from .models import LaneSender

        self.synced_at = now
        unwritten, self.unwritten = self.unwritten, {}
        rows = [
            LaneSender(tenant_id=tenant, sent_at=datetime.fromtimestamp(at, UTC))
            for tenant, at in unwritten.items()
        ]
        cutoff = datetime.fromtimestamp(now - seconds, UTC)
        try:
            with transaction.atomic():  # within a caller's transaction, a savepoint
                LaneSender.objects.bulk_create(
                    rows, update_conflicts=True, unique_fields=["tenant"], update_fields=["sent_at"]
                )
                latest = list(
                    LaneSender.objects.filter(sent_at__gt=cutoff)
                    .order_by("-sent_at")
                    .values_list("tenant_id", "sent_at")[:2]
                )
        except DatabaseError:  # tried again in a second, with the senders seen by then
            logger.warning("Sharing the tenants that sent lately failed", exc_info=True)
            return
        for tenant, at in latest:
            self._note(tenant, at.timestamp())


CONTENTION = Contention()


def waiting_read(tenant_id: int) -> tuple[str, list[Any]]:
    """Whether runs of the tenant wait in its lane (a look at the `task_held` index), for the
    round trip of a run's last write (rowsql.together's `read`)."""
    table, c = rowsql.names(Task)
    return (
        f"SELECT EXISTS (SELECT 1 FROM {table} WHERE {c['tenant']} = %s AND {c['held']})",
        [tenant_id],
    )


def in_flight_read(lane: Lane) -> tuple[str, list[Any]]:
    """The read of the tenant's runs in flight, up to its window, for the send's own round trip
    (rowsql.together's `read`)."""
    return _in_flight_sql(), [lane.tenant_id, lane.window]


def hold(task_id: uuid.UUID, job_id: str) -> None:
    """Put a run just sent, not yet handed to the broker, in its lane (the send learnt only as
    it was written that the window was full)."""
    Task.objects.filter(pk=task_id, job_id=job_id, running_since__isnull=True).update(held=True)


def _count(where: Q, limit: int) -> int:
    """How many tasks match, counting no further than `limit` (an index range, not a scan)."""
    return Task.objects.filter(where)[:limit].count()


def _queued(tenant_id: int, limit: int) -> int:
    """The tenant's runs not started yet: waiting in its lane, or handed to the broker."""
    held = _count(Q(tenant_id=tenant_id, held=True), limit)
    handed = Q(tenant_id=tenant_id, running_since__isnull=True) & IN_FLIGHT
    return held + _count(handed, limit - held) if held < limit else held


def send_admit(lane: Lane, *, new_task: bool) -> None:
    """Refuse a send, before it writes anything, that would take the tenant past a quota or
    its `queued_runs` (LimitExceeded). Counted without a lock: sends at the same moment may
    each take the last place, so these bound a tenant to within the sends it makes at once."""
    limits = lane.limits
    if new_task and limits.stored_tasks:
        _stored_tasks_check(lane)
    if limits.runs_per_day or limits.runs_per_month:
        _runs_quota_check(lane)
    if limits.queued_runs and _queued(lane.tenant_id, limits.queued_runs) >= limits.queued_runs:
        _refuse(
            lane,
            f"This tenant already has {limits.queued_runs} runs waiting to start, its limit "
            "(queued_runs); send again once some have started.",
            kind=LimitExceeded.CONCURRENCY,
            limit="queued_runs",
            retry_after=1.0,
        )


def window_full(lane: Lane) -> bool:
    """Whether the tenant has its window of runs in flight (a send's run then waits)."""
    window = lane.window
    return bool(window) and _count(Q(tenant_id=lane.tenant_id) & IN_FLIGHT, window) >= window


def _refuse(
    lane: Lane, message: str, *, kind: tuple[str, int], limit: str, retry_after: float
) -> NoReturn:
    """Count the refusal in the tenant's usage, and raise it."""
    refused = "refused_quota" if kind == LimitExceeded.QUOTA else "refused_concurrency"
    usage.count(tenant_id=lane.tenant_id, agent_id=lane.agent_id, **{refused: 1})
    raise LimitExceeded(
        message,
        kind=kind,
        limit=limit,
        value=getattr(lane.limits, limit),
        scope="tenant",
        retry_after=retry_after,
    )


def _stored_tasks_check(lane: Lane) -> None:
    cap = lane.limits.stored_tasks
    stored = (
        TaskCount.objects.filter(agent__tenant_id=lane.tenant_id).aggregate(n=Sum("n"))["n"] or 0
    )
    if stored >= cap:
        _refuse(
            lane,
            f"This tenant stores {stored} tasks, its limit (stored_tasks) is {cap}; a new task "
            "can be made once older ones are deleted (A2A_TASK_RETENTION_DAYS) or the limit is "
            "raised.",
            kind=LimitExceeded.QUOTA,
            limit="stored_tasks",
            retry_after=3600.0,
        )


def _runs_quota_check(lane: Lane) -> None:
    """Runs per UTC day and month: the runs counted in the tenant's usage (agents.usage, soft
    by one flush interval) and those accepted but not started yet."""
    now = timezone.now().astimezone(UTC)
    today = now.date()
    month_start = today.replace(day=1)
    waiting = _queued(lane.tenant_id, 1_000_000)
    for limit, since, ends in (
        ("runs_per_day", today, datetime.combine(today + timedelta(days=1), time(), UTC)),
        (
            "runs_per_month",
            month_start,
            datetime.combine((month_start + timedelta(days=32)).replace(day=1), time(), UTC),
        ),
    ):
        cap = getattr(lane.limits, limit)
        if not cap:
            continue
        used = usage.runs_counted(tenant_id=lane.tenant_id, since=since) + waiting
        if used >= cap:
            period = "today (UTC)" if limit == "runs_per_day" else "this month (UTC)"
            _refuse(
                lane,
                f"This tenant has used {used} of its {cap} runs {period} ({limit}); it can "
                f"send again from {ends:%Y-%m-%d %H:%M} UTC.",
                kind=LimitExceeded.QUOTA,
                limit=limit,
                retry_after=(ends - now).total_seconds(),
            )


Promoted = tuple[uuid.UUID, str, dict[str, Any]]


def promote(*, tenant_id: int, agent: Agent | None = None) -> list[Promoted]:
    """Hand the oldest runs waiting in the tenant's lane to the broker, as many as it has room
    for (a run of the tenant just ended, or a send of a tenant with a cap joined the lane);
    returns them, published. Nothing is read but an empty index range when nothing waits.

    A lane bound by its window and `running_runs` is handed over in one statement
    (`_promote_sql`); with a cap, under the tenant's lock, held for that statement and the
    commit only. A tenant with an agent that has `agent_running_runs` goes through `_promote`,
    which counts by agent."""
    if agent is not None and connection.vendor == "postgresql":
        lane = Lane.of(agent)
        if lane.window and not _agent_caps(lane):
            return _promote_at_once(lane)
    if not Task.objects.filter(tenant_id=tenant_id, held=True).exists():
        return []
    if agent is None:
        from agents.cache import agent_by_pk

        first = Task.objects.filter(tenant_id=tenant_id, held=True).values("agent_id").first()
        if first is None:
            return []
        agent = agent_by_pk(first["agent_id"])
    lane = Lane.of(agent)
    with transaction.atomic():
        if lane.exact:
            lock(tenant_id)
        return _promote(lane)


def _agent_caps(lane: Lane) -> bool:
    """Whether some agent of the tenant has a cap on its runs at once (its plan's, or one of
    its own), which the one-statement hand-over does not count."""
    return bool(lane.limits.agent_running_runs) or tenant_agent_caps(lane.tenant_id)


def _promote(lane: Lane) -> list[Promoted]:
    tenant = Q(tenant_id=lane.tenant_id)
    window = lane.window
    room = window - _count(tenant & IN_FLIGHT, window) if window else 1_000
    if room <= 0:
        return []
    waiting = (
        Task.objects.select_for_update(skip_locked=True)
        .filter(tenant, held=True)
        .exclude(state__in=TERMINAL_STATES)
        .order_by("job_queued_at", "id")
        .values_list("pk", "agent_id", "job_id", "job_args")
    )
    agent_caps: dict[int, int] = {}
    promoted: list[Promoted] = []
    for pk, agent_id, job_id, job_args in waiting[: room * 4]:
        if len(promoted) >= room:
            break
        if not _agent_has_room(lane, agent_id, agent_caps):
            continue
        promoted.append((pk, job_id, job_args))
    if not promoted:
        return []
    Task.objects.filter(pk__in=[pk for pk, _, _ in promoted]).update(
        held=False, job_queued_at=timezone.now()
    )
    from . import services

    for pk, job_id, job_args in promoted:
        transaction.on_commit(
            lambda pk=pk, job_id=job_id, job_args=job_args: services.enqueue_run(
                pk, job_id, job_args
            ),
            robust=True,
        )
    return promoted


@functools.cache
def _promote_sql() -> str:
    """`_promote` for a lane bound by its window alone, as one statement: take the room the
    window has (its size less the runs in flight, `_in_flight_sql`) from the oldest waiting
    runs, skipping rows another hand-over holds, and return them."""
    table, c = rowsql.names(Task)
    terminal = ", ".join(["%s"] * len(TERMINAL_STATES))
    return (
        f"WITH next AS (SELECT {c['id']} FROM {table} WHERE {c['tenant']} = %s AND {c['held']} "
        f"AND {c['state']} NOT IN ({terminal}) ORDER BY {c['job_queued_at']}, {c['id']} "
        f"LIMIT GREATEST(%s - ({_in_flight_sql()}), 0) FOR UPDATE SKIP LOCKED) "
        f"UPDATE {table} SET {c['held']} = false, {c['job_queued_at']} = %s FROM next "
        f"WHERE {table}.{c['id']} = next.{c['id']} "
        f"RETURNING {table}.{c['id']}, {table}.{c['job_id']}, {table}.{c['job_args']}"
    )


def _promote_at_once(lane: Lane) -> list[Promoted]:
    from . import services

    now = Task._meta.get_field("job_queued_at").get_db_prep_save(timezone.now(), connection)
    params = [lane.tenant_id, *sorted(TERMINAL_STATES), lane.window, lane.tenant_id, lane.window]
    with transaction.atomic() if lane.exact else contextlib.nullcontext():
        if lane.exact:
            lock(lane.tenant_id)
        with rowsql.cursor() as cursor:
            cursor.execute(_promote_sql(), [*params, now])
            rows = cursor.fetchall()
    promoted = []
    for pk, job_id, job_args in rows:
        args = json.loads(job_args) if isinstance(job_args, str) else job_args
        try:
            services.enqueue_run(pk, job_id, args)
        except Exception:  # the broker: the lost-job requeue queues it once the broker is back
            logger.warning("Could not queue the run of task %s", pk, exc_info=True)
        promoted.append((pk, job_id, args))
    return promoted


def _agent_has_room(lane: Lane, agent_id: int, rooms: dict[int, int]) -> bool:
    """Whether one more run of agent `agent_id` may go (its `agent_running_runs`); counts the
    ones this hand-over already took (`rooms`: what is left per agent)."""
    from agents.cache import agent_by_pk

    if agent_id not in rooms:
        cap = call_limits(agent_by_pk(agent_id)).agent_running_runs
        if not cap:
            rooms[agent_id] = 1_000_000
        else:
            in_flight = _count(Q(tenant_id=lane.tenant_id, agent_id=agent_id) & IN_FLIGHT, cap)
            rooms[agent_id] = cap - in_flight
    if rooms[agent_id] <= 0:
        return False
    rooms[agent_id] -= 1
    return True


def lanes_refill() -> int:
    """The reaper's round: hand over what every lane has room for, and say in the status of
    each new task that has waited longer than `A2A_LANE_NOTE_SECONDS` why it waits. Returns
    how many runs went."""
    tenants = (
        Task.objects.filter(held=True).values_list("tenant_id", flat=True).distinct().order_by()
    )
    moved = 0
    for tenant_id in list(tenants):
        try:
            moved += len(promote(tenant_id=tenant_id))
            _notes_write(tenant_id)
        except Exception:
            logger.warning("Refilling the lane of tenant %s failed", tenant_id, exc_info=True)
    return moved


# Lane notes written in one reaper round, per tenant: a long lane is noted over a few rounds.
NOTES_PER_ROUND = 200


def _notes_write(tenant_id: int) -> None:
    from . import services

    waited = timezone.now() - timedelta(seconds=settings.A2A_LANE_NOTE_SECONDS)
    waiting = list(
        Task.objects.filter(
            tenant_id=tenant_id, held=True, last_seq=1, job_queued_at__lt=waited
        ).values_list("pk", "agent_id")[:NOTES_PER_ROUND]
    )
    if not waiting:
        return
    from agents.cache import agent_by_pk

    lane = Lane.of(agent_by_pk(waiting[0][1]))
    text = lane.note(_count(Q(tenant_id=tenant_id) & IN_FLIGHT, 1_000_000))
    for pk, _ in waiting:
        services.task_lane_note(task_id=pk, text=text)
