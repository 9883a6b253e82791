"""Console pages: a tenant's usage (the last 30 days as charts, a table by agent, its limits)
and its exports, CSV and JSON, by agent and day for billing. Everyone who sees the tenant sees
its usage; the exports are for its owners and the operators."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.cache import never_cache

from agents import plans, usage
from agents.cache import tenant_limits
from agents.models import Agent, Tenant

from . import charts
from .scoping import can_manage, require_manager
from .selectors import User, tenant_get_or_404, tenant_scope

# The page shows this many days, today (UTC) the last.
PAGE_DAYS = 30
# An export covers at most this many days: a year, a leap day included.
EXPORT_MAX_DAYS = 366
# Tenants offered in the page's tenant chooser.
MAX_TENANTS_LISTED = 500
DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Cell:
    name: str  # the counter
    label: str
    value: float
    text: str


# The table's columns: counter -> heading (the mobile layout's label).
COLUMNS = {
    "requests": "Requests",
    "runs": "Runs",
    "run_seconds": "Run time",
    "tokens_in": "Tokens in",
    "tokens_out": "Tokens out",
    "push_deliveries": "Push deliveries",
    "refused_rate": "Refused: rate",
    "refused_quota": "Refused: quota",
    "refused_concurrency": "Refused: concurrency",
}
assert tuple(COLUMNS) == usage.COUNTERS


def _cells(counts: dict[str, float]) -> list[Cell]:
    return [
        Cell(name=name, label=label, value=counts[name], text=_text(name, counts[name]))
        for name, label in COLUMNS.items()
    ]


def _text(name: str, value: float) -> str:
    if name == "run_seconds":
        return charts.format_seconds(value) if value else "0"
    return charts.format_count(value)


@dataclass(frozen=True)
class LimitRow:
    name: str
    label: str
    value: str  # "unlimited" for 0
    unit: str
    help: str
    used: int | None = None  # for the run quotas: runs counted so far in the period


@login_required
def usage_page(request: HttpRequest, tenant_slug: str | None = None) -> HttpResponse:
    """The tenant's usage page; without a tenant in the path (the console's menu), the tenant
    chosen with `?tenant=`, or the first the user sees."""
    user: User = request.user
    tenants = list(tenant_scope(user=user).order_by("slug")[:MAX_TENANTS_LISTED])
    slug = tenant_slug or request.GET.get("tenant", "").strip()
    if slug:
        tenant = tenant_get_or_404(user=user, tenant_slug=slug)
    elif tenants:
        tenant = tenants[0]
    else:
        return render(request, "console/usage.html", {"tenant": None, "tenants": []})
    until = usage.today()
    since = until - timedelta(days=PAGE_DAYS - 1)
    rows = usage.usage_read(tenant_id=tenant.pk, since=since, until=until)
    series = usage.usage_by_day(rows, since=since, until=until)
    by_agent = usage.usage_by_agent(rows)
    agents = list(Agent.objects.filter(tenant=tenant).order_by("slug"))
    zero = dict.fromkeys(usage.COUNTERS, 0)
    counted = [by_agent.get(agent.pk, zero) for agent in agents]
    totals = {name: sum(counts[name] for counts in counted) for name in usage.COUNTERS}
    return render(
        request,
        "console/usage.html",
        {
            "tenant": tenant,
            "tenants": tenants if len(tenants) > 1 else [],
            "since": since,
            "until": until,
            "svgs": _charts(series),
            "table": [(a, _cells(c)) for a, c in zip(agents, counted, strict=True)],
            "totals": _cells(totals),
            "columns": list(COLUMNS.values()),
            "limits": _limit_rows(tenant, until),
            "weight": tenant_limits(tenant).weight,
            "plan": _plan_text(tenant),
            "can_export": can_manage(user, tenant),
            "flush_seconds": settings.A2A_USAGE_FLUSH_SECONDS,
        },
    )


def _charts(series: usage.DaySeries) -> list[SafeString]:
    labels = [day.strftime("%m-%d") for day in series.days]
    values = series.values
    refused = [
        r + q + c
        for r, q, c in zip(
            values["refused_rate"], values["refused_quota"], values["refused_concurrency"],
            strict=True,
        )
    ]  # fmt: skip
    # Each SVG is built by console.charts, which escapes every text it writes.
    return [
        mark_safe(svg)
        for svg in (
            charts.bar_chart(
                title="Runs per day",
                x_labels=labels,
                values=values["runs"],
                y_label="runs",
                name="runs",
            ),
            charts.line_chart(
                title="A2A calls per day",
                x_labels=labels,
                series=[
                    charts.Series("requests", values["requests"]),
                    charts.Series("refused", refused),
                ],
                y_label="calls",
            ),
            charts.latency_chart(
                title="Run time per day",
                x_labels=labels,
                series=[charts.Series("run time", values["run_seconds"])],
            ),
            charts.line_chart(
                title="Model tokens per day",
                x_labels=labels,
                series=[
                    charts.Series("in", values["tokens_in"]),
                    charts.Series("out", values["tokens_out"]),
                ],
                y_label="tokens",
            ),
            charts.bar_chart(
                title="Push deliveries per day",
                x_labels=labels,
                values=values["push_deliveries"],
                y_label="POSTs",
                name="push deliveries",
            ),
        )
    ]


def _limit_rows(tenant: Tenant, today: date) -> list[LimitRow]:
    """The tenant's effective limits (its plan's, or the default plan's, with its overrides),
    with what the run quotas have counted so far."""
    limits = tenant_limits(tenant)
    used = {
        "runs_per_day": usage.runs_counted(tenant_id=tenant.pk, since=today),
        "runs_per_month": usage.runs_counted(tenant_id=tenant.pk, since=today.replace(day=1)),
    }
    rows = []
    for spec in plans.LIMITS:
        value = getattr(limits, spec.name)
        rows.append(
            LimitRow(
                name=spec.name,
                label=spec.label,
                value=f"{value:,}" if value else "unlimited",
                unit=spec.unit if value else "",
                help=spec.help,
                used=used.get(spec.name),
            )
        )
    return rows


def _plan_text(tenant: Tenant) -> str:
    if tenant.plan is not None:
        return tenant.plan.name
    if default := plans.default_plan_name():
        return f"{default} (the default plan)"
    return "none: no limits but the tenant's own"


# --- exports ------------------------------------------------------------------------------


class RangeError(ValueError):
    """A date range an export does not take; its message says why, for the client."""


def export_range(query: QueryDict, *, today: date) -> tuple[date, date]:
    """`from` and `to` (YYYY-MM-DD, UTC days, both included); by default the last 30 days."""
    until = _day(query, "to") or today
    since = _day(query, "from") or until - timedelta(days=PAGE_DAYS - 1)
    if since > until:
        raise RangeError(f"'from' ({since}) is after 'to' ({until}).")
    days = (until - since).days + 1
    if days > EXPORT_MAX_DAYS:
        raise RangeError(
            f"From {since} to {until} is {days} days; an export covers at most "
            f"{EXPORT_MAX_DAYS} days: ask for the range in parts."
        )
    return since, until


def _day(query: QueryDict, name: str) -> date | None:
    raw = query.get(name, "").strip()
    if not raw:
        return None
    if not DAY.fullmatch(raw):
        raise RangeError(f"'{name}' must be a date as YYYY-MM-DD, not {raw[:40]!r}.")
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise RangeError(f"'{name}' {raw!r} is not a day of the calendar.") from None


def _export_rows(
    request: HttpRequest, tenant_slug: str
) -> tuple[Tenant, date, date, list[usage.UsageRow]]:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    since, until = export_range(request.GET, today=usage.today())
    return tenant, since, until, usage.usage_read(tenant_id=tenant.pk, since=since, until=until)


def _record(row: usage.UsageRow) -> dict[str, Any]:
    record: dict[str, Any] = {"day": row["day"].isoformat(), "agent": row["agent"]}
    for name in usage.COUNTERS:
        value = row[name]  # type: ignore[literal-required]
        record[name] = round(value, 3) if name == "run_seconds" else value
    return record


@never_cache
@login_required
def usage_json(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    try:
        tenant, since, until, rows = _export_rows(request, tenant_slug)
    except RangeError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    records = [_record(row) for row in rows]
    totals = {name: sum(r[name] for r in records) for name in usage.COUNTERS}
    totals["run_seconds"] = round(totals["run_seconds"], 3)
    return JsonResponse(
        {
            "tenant": tenant.slug,
            "from": since.isoformat(),
            "to": until.isoformat(),
            "rows": records,
            "totals": totals,
        }
    )


@never_cache
@login_required
def usage_csv(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    try:
        tenant, since, until, rows = _export_rows(request, tenant_slug)
    except RangeError as exc:
        return HttpResponse(f"{exc}\n", status=400, content_type="text/plain; charset=utf-8")
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["tenant", "day", "agent", *usage.COUNTERS])
    for row in rows:
        record = _record(row)
        writer.writerow([tenant.slug, *record.values()])
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="usage-{tenant.slug}-{since}-{until}.csv"'
    )
    return response
