"""Usage metering: what each tenant's agents use, per UTC day (the UsageDay rows).

Counting is on the hot paths (every A2A call, every run), so it does no I/O: `count()` adds to
this process's buffer (a2a_platform.buffers), a dict keyed by (tenant, agent, day) whose counts
are merged per key. A daemon thread adds the buffer to PostgreSQL every
`A2A_USAGE_FLUSH_SECONDS` with one `INSERT ... ON CONFLICT DO UPDATE SET n = n + EXCLUDED.n`
per batch, so the database sees one statement per process per interval however busy the
process is. The buffer is flushed also
when the process exits (atexit: after a web process's or the sidecar's drain, which ends with
the process), and when a Celery worker stops (its warm shutdown begins a flush at once; its
end, once the runs have ended, flushes what they counted since).

What is lost: a process killed outright (SIGKILL, a lost machine) loses the counts of at most
one interval. A flush that fails (the database away, or its table not migrated yet in a
rolling upgrade) keeps its counts for the next one; the buffer stays bounded meanwhile, as
counts merge per key (one entry per agent and day in use). A flush whose commit succeeded but
whose answer was lost is counted again: usage errs on the side of counting. The counts of an
agent deleted before they were flushed go with it (docs/decisions.md, "Usage metering").

Where each counter is counted:
- requests: bindings.callers, once per A2A call whose agent and caller were identified;
- runs and run_seconds: tasks_app.runtime, a run being a job a worker claimed, its seconds
  from the claim to the release (`run_metered`);
- tokens_in and tokens_out: the `openai` kind, from the model's reported usage (`run_count`);
- push_deliveries: push_app.delivery, per POST attempted;
- refused_rate, refused_quota, refused_concurrency: the admission point, per refusal.
Stored bytes are not metered.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, TypedDict

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Sum

from a2a_platform.buffers import Buffer

from .models import Agent, UsageDay

COUNTERS = (
    "requests",
    "runs",
    "run_seconds",
    "tokens_in",
    "tokens_out",
    "push_deliveries",
    "refused_rate",
    "refused_quota",
    "refused_concurrency",
)
_KNOWN = frozenset(COUNTERS)
# Rows in one INSERT; a larger batch is several statements in one transaction.
ROWS_PER_STATEMENT = 500

Key = tuple[int, int, date]  # tenant id, agent id, UTC day


def today() -> date:
    """The UTC day counts go to."""
    return datetime.now(UTC).date()


class Meter(Buffer[Key, dict[str, float]]):
    """A process's buffer of counts (a2a_platform.buffers) and its flush. One per process
    (`METER`), whose thread starts with its first count; tests make their own, flushed by hand
    (`background=False`)."""

    name = "usage"
    label = "Usage"
    what = "agent-days"

    def count(
        self, tenant_id: int, agent_id: int, counters: Mapping[str, float], day: date | None = None
    ) -> None:
        """Add `counters` to the (tenant, agent, day) entry: no I/O, a lock held for a dict
        update."""
        if not counters.keys() <= _KNOWN:
            raise TypeError(f"Not usage counters: {', '.join(sorted(counters.keys() - _KNOWN))}.")
        if any(n < 0 for n in counters.values()):
            raise ValueError(f"Usage only grows: {dict(counters)}.")
        self.add((tenant_id, agent_id, day or today()), dict(counters))

    def interval(self) -> float:
        return float(settings.A2A_USAGE_FLUSH_SECONDS)

    def combine(self, entry: dict[str, float], more: dict[str, float]) -> dict[str, float]:
        for name, n in more.items():
            entry[name] = entry.get(name, 0) + n
        return entry

    def write(self, batch: dict[Key, dict[str, float]]) -> None:
        usage_add(batch)


METER = Meter(process_wide=True)


def count(*, tenant_id: int, agent_id: int, **counters: float) -> None:
    """Count usage of the agent today (UTC), e.g. `count(tenant_id=t, agent_id=a, requests=1)`.
    In memory only: flushed to the database within `A2A_USAGE_FLUSH_SECONDS`."""
    METER.count(tenant_id, agent_id, counters)


# --- runs: what a worker's runtime and the executors count -------------------------------------


class RunMeter:
    """One run, counted when claimed; `end()` counts its seconds. While it is open the run's
    executor (started from the same asyncio task, so in the same context) counts to the run's
    agent with `run_count`."""

    __slots__ = ("tenant_id", "agent_id", "meter", "_started", "_token")

    def __init__(self, tenant_id: int, agent_id: int, meter: Meter) -> None:
        self.tenant_id, self.agent_id, self.meter = tenant_id, agent_id, meter
        self._started = time.monotonic()
        self._token = _run.set(self)
        meter.count(tenant_id, agent_id, {"runs": 1})

    def count(self, counters: Mapping[str, float]) -> None:
        self.meter.count(self.tenant_id, self.agent_id, counters)

    def end(self) -> None:
        _run.reset(self._token)
        self.count({"run_seconds": time.monotonic() - self._started})


_run: contextvars.ContextVar[RunMeter | None] = contextvars.ContextVar(
    "a2a_usage_run", default=None
)


def run_metered(*, tenant_id: int, agent_id: int, meter: Meter | None = None) -> RunMeter:
    """Count a run of the agent starting now; call `end()` on what it returns when it ends."""
    return RunMeter(tenant_id, agent_id, meter or METER)


def run_count(**counters: float) -> bool:
    """Count usage of the agent whose run this is (model tokens, say); False, counting
    nothing, outside a platform run (an executor's own tests)."""
    run = _run.get()
    if run is None:
        return False
    run.count(counters)
    return True


# --- the flush ----------------------------------------------------------------------------------


# How long a flush waits for a lock before it gives up and keeps its counts for the next one.
LOCK_TIMEOUT_MS = 500


def _upsert_sql(rows: int) -> str:
    table = UsageDay._meta.db_table
    agents = Agent._meta.db_table
    columns = ("tenant_id", "agent_id", "day", *COUNTERS)
    row = "(" + ", ".join(["%s"] * len(columns)) + ")"
    names = ", ".join(columns)
    added = ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in COUNTERS)
    # Rows of an agent deleted since it was counted are left out by the join (its usage went
    # with it); `WHERE true` tells SQLite's parser the ON CONFLICT is not the join's.
    return (
        f"WITH v ({names}) AS (VALUES {', '.join([row] * rows)}) "
        f"INSERT INTO {table} ({names}) "
        f"SELECT {', '.join(f'v.{c}' for c in columns)} FROM v "
        f"JOIN {agents} a ON a.id = v.agent_id AND a.tenant_id = v.tenant_id WHERE true "
        f"ON CONFLICT (tenant_id, agent_id, day) DO UPDATE SET {added}"
    )


def usage_add(batch: Mapping[Key, Mapping[str, float]]) -> None:
    """Add counts to the day rows: one statement per ROWS_PER_STATEMENT rows, all in one
    transaction, so a batch is added whole or not at all. Rows go in key order, so two
    processes adding to the same rows take their locks in the same order and never deadlock.

    Why a statement of its own: `bulk_create(update_conflicts=True)` sets the new value rather
    than adding to the stored one, and an F() update per row is a round trip per row and needs
    the row to exist first."""
    rows = sorted(batch.items())
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # Counting yields to whatever locks the tables (a migration, a TRUNCATE): past
            # this wait the batch fails and is kept for the next flush, where waiting on would
            # hold up that work, or deadlock with it, at its deadlock_timeout (1 s).
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT_MS}ms'")
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start : start + ROWS_PER_STATEMENT]
            params: list[Any] = []
            for (tenant_id, agent_id, day), counters in chunk:
                params += [tenant_id, agent_id, day]
                params += [_value(name, counters.get(name, 0)) for name in COUNTERS]
            cursor.execute(_upsert_sql(len(chunk)), params)


def _value(name: str, n: float) -> float:
    return float(n) if name == "run_seconds" else int(n)


# --- reads ----------------------------------------------------------------------------------


class UsageRow(TypedDict):
    agent_id: int
    agent: str  # the agent's slug
    day: date
    requests: int
    runs: int
    run_seconds: float
    tokens_in: int
    tokens_out: int
    push_deliveries: int
    refused_rate: int
    refused_quota: int
    refused_concurrency: int


def usage_read(
    *, tenant_id: int, since: date, until: date, agent_id: int | None = None
) -> list[UsageRow]:
    """The tenant's day rows from `since` to `until` (both included), by day then agent
    slug; with `agent_id`, that agent's only. What processes have not flushed yet is not in
    them (at most `A2A_USAGE_FLUSH_SECONDS` behind)."""
    rows = UsageDay.objects.filter(tenant_id=tenant_id, day__gte=since, day__lte=until)
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    values = rows.order_by("day", "agent__slug").values("agent_id", "agent__slug", "day", *COUNTERS)
    return [_row(v) for v in values]


def _row(values: dict[str, Any]) -> UsageRow:
    row = {"agent_id": values["agent_id"], "agent": values["agent__slug"], "day": values["day"]}
    row.update({name: _value(name, values[name]) for name in COUNTERS})
    return row  # type: ignore[return-value]


def runs_counted(*, tenant_id: int, since: date) -> int:
    """The tenant's runs from day `since` (UTC) on, as PostgreSQL has them: this and every
    other process's counts not yet flushed are not included, so a quota read from it is soft
    by up to `A2A_USAGE_FLUSH_SECONDS` of runs."""
    total = UsageDay.objects.filter(tenant_id=tenant_id, day__gte=since).aggregate(n=Sum("runs"))
    return int(total["n"] or 0)


def usage_today_totals(*, by_tenant: bool) -> dict[str, dict[str, float]]:
    """Today's (UTC) counts of the whole platform, by tenant slug (or under "" with
    `by_tenant` false): what the Prometheus metrics report (a2a_platform.metrics)."""
    rows = UsageDay.objects.filter(day=today())
    sums = {name: Sum(name) for name in COUNTERS}
    if not by_tenant:
        total = rows.aggregate(**sums)
        return {"": {name: _value(name, total[name] or 0) for name in COUNTERS}}
    return {
        row["tenant__slug"]: {name: _value(name, row[name] or 0) for name in COUNTERS}
        for row in rows.values("tenant__slug").order_by("tenant__slug").annotate(**sums)
    }


@dataclass(frozen=True)
class DaySeries:
    """A tenant's days from `since` to `until`, every one of them (0 where nothing was
    counted), summed over its agents: one list per counter, for the console's charts."""

    days: list[date]
    values: dict[str, list[float]]


def usage_by_day(rows: Iterable[UsageRow], *, since: date, until: date) -> DaySeries:
    days = [since + timedelta(days=i) for i in range((until - since).days + 1)]
    at = {day: i for i, day in enumerate(days)}
    values: dict[str, list[float]] = {name: [0] * len(days) for name in COUNTERS}
    for row in rows:
        i = at.get(row["day"])
        if i is not None:
            for name in COUNTERS:
                values[name][i] += row[name]  # type: ignore[literal-required]
    return DaySeries(days=days, values=values)


def usage_by_agent(rows: Iterable[UsageRow]) -> dict[int, dict[str, float]]:
    """Counts summed per agent id."""
    totals: dict[int, dict[str, float]] = {}
    for row in rows:
        entry = totals.setdefault(row["agent_id"], dict.fromkeys(COUNTERS, 0))
        for name in COUNTERS:
            entry[name] += row[name]  # type: ignore[literal-required]
    return totals
