"""Console pages: the audit log (docs/audit.md), filtered and in keyset pages, and its exports
(CSV and JSON Lines) of the same filters.

Who sees what: operators every event, the platform's own (plans, accounts, logins) among them;
a tenant's owners and members its events, but the addresses they came from only its owners
(where a colleague was is theirs to know, not every member's); the exports are for owners (of
the tenants they own) and operators, as the usage exports are. Scoping is console.selectors'
(`audit_scope`, `audit_export_scope`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.http import urlencode
from django.views.decorators.cache import never_cache

from agents.models import Tenant
from audit.models import AUTH_FAILURE, AuditEvent
from audit.selectors import (
    ACTIONS,
    PLATFORM_OBJECT_TYPES,
    TENANT_OBJECT_TYPES,
    EventFilters,
    EventRecord,
    InvalidPageToken,
    event_chunks,
    event_page,
    event_record_of,
    events_filtered,
)

from .selectors import (
    User,
    audit_export_scope,
    audit_owned_tenant_ids,
    audit_scope,
    tenant_scope,
)

PAGE_SIZE = 50
# Tenants offered in the tenant filter.
MAX_TENANTS_LISTED = 500
# The tenant filter's value for the platform's own events (operators).
PLATFORM = "-"
_DATE = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
_DATE_ERROR = "Enter a day like 2026-01-31 (UTC)."


class AuditFilterForm(forms.Form):
    """The log's filters, from the query string. The tenant is one the person sees, and an
    error never repeats (or confirms) another tenant's slug."""

    tenant = forms.CharField(required=False, max_length=63, widget=forms.Select)
    actor = forms.CharField(required=False, max_length=200, help_text="user:alice, command:…")
    action = forms.ChoiceField(
        required=False,
        choices=[("", "any action"), *((a, a) for a in ACTIONS)],
        error_messages={"invalid_choice": "not an action the log records; pick one from the list."},
    )
    object_type = forms.ChoiceField(
        required=False,
        label="Object",
        error_messages={"invalid_choice": "not a kind of object the log has; pick from the list."},
    )
    q = forms.CharField(required=False, max_length=200, label="Search")
    since = forms.DateField(
        required=False,
        label="From",
        input_formats=["%Y-%m-%d"],
        widget=_DATE,
        error_messages={"invalid": _DATE_ERROR},
    )
    until = forms.DateField(
        required=False,
        label="To",
        input_formats=["%Y-%m-%d"],
        widget=_DATE,
        error_messages={"invalid": _DATE_ERROR},
    )

    def __init__(self, data: Any, *, user: User, tenants: list[Tenant]) -> None:
        super().__init__(data)
        self.user = user
        self.selected_tenant: Tenant | None = None
        staff = bool(user.is_staff)
        everything = "every tenant and the platform" if staff else "all your tenants"
        tenant_choices = [("", everything)]
        if staff:
            tenant_choices.append((PLATFORM, "the platform (no tenant)"))
        tenant_choices += [(t.slug, t.slug) for t in tenants]
        self.fields["tenant"].widget.choices = tenant_choices
        kinds = TENANT_OBJECT_TYPES + (PLATFORM_OBJECT_TYPES if staff else ())
        self.fields["object_type"].choices = [
            ("", "any object"),
            *((kind, kind.replace("_", " ")) for kind in kinds),
        ]

    def clean_tenant(self) -> str:
        slug: str = self.cleaned_data.get("tenant") or ""
        if not slug or (slug == PLATFORM and self.user.is_staff):
            return slug
        self.selected_tenant = tenant_scope(user=self.user).filter(slug=slug).first()
        if self.selected_tenant is None:
            raise forms.ValidationError("not a tenant you can see; pick one from the list.")
        return slug

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since > until:
            self.add_error("until", "must not be before 'From'.")
        return cleaned

    def problems(self) -> list[str]:
        """Each error as one line naming the field as the page and its URL do."""
        return [
            f"{self.fields[name].label or name.title()} ({name}): {error}"
            for name, errors in self.errors.items()
            for error in errors
        ]

    def events(self, scope: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        """`scope` narrowed by the (valid) filters."""
        data = self.cleaned_data
        if data["tenant"] == PLATFORM:
            scope = scope.filter(tenant_id__isnull=True)
        elif self.selected_tenant is not None:
            scope = scope.filter(tenant_id=self.selected_tenant.pk)
        filters = EventFilters(
            actor=data["actor"].strip(),
            action=data["action"],
            object_type=data["object_type"],
            text=data["q"].strip(),
            since=data["since"],
            until=data["until"],
        )
        return events_filtered(events=scope, filters=filters)


def _filter_query(request: HttpRequest, form: AuditFilterForm, **extra: str) -> str:
    """The query string of the current filters (the known ones the form took: a refused value,
    another tenant's slug say, is not repeated in the page's links), plus `extra`."""
    params = {
        k: request.GET[k]
        for k in AuditFilterForm.base_fields
        if request.GET.get(k) and k not in form.errors
    }
    params.update(extra)
    return urlencode(params)


def _tenant_names(tenant_ids: Iterable[int | None]) -> dict[int | None, str]:
    """How the page and the exports name each event's tenant: its slug, the platform's own,
    or the id of one deleted since (its log outlives it)."""
    ids = {pk for pk in tenant_ids if pk is not None}
    slugs = dict(Tenant.objects.filter(pk__in=ids).values_list("pk", "slug"))
    names: dict[int | None, str] = {None: "(platform)"}
    names.update({pk: slugs.get(pk, f"#{pk} (deleted)") for pk in ids})
    return names


# --- the page -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    field: str
    before: str | None  # None: there was no before (a create)
    after: str


@dataclass(frozen=True)
class EventRow:
    event: AuditEvent
    tenant: str
    source: str | None  # None: not shown to this person
    sources: list[str]
    changes: list[Change]


def _text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return value or '""'
    return json.dumps(value, ensure_ascii=False)


def _row(event: AuditEvent, *, tenant: str, addresses: bool) -> EventRow:
    # By name: the stored object's own order is the database's (jsonb sorts its keys).
    changes = [
        Change(field, None if pair[0] is None else _text(pair[0]), _text(pair[1]))
        if isinstance(pair, list) and len(pair) == 2
        else Change(field, None, _text(pair))
        for field, pair in sorted((event.changes or {}).items())
    ]
    return EventRow(
        event=event,
        tenant=tenant,
        source=(event.source or "—") if addresses else None,
        sources=list(event.sources or []) if addresses else [],
        changes=changes,
    )


@never_cache  # addresses and who did what: not for a shared cache
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    user: User = request.user
    tenants = list(tenant_scope(user=user).order_by("slug")[:MAX_TENANTS_LISTED])
    form = AuditFilterForm(request.GET, user=user, tenants=tenants)
    valid = form.is_valid()
    problems = form.problems()
    owned = audit_owned_tenant_ids(user=user)
    after = request.GET.get("after", "")
    rows: list[EventRow] = []
    next_query = ""
    if valid:
        try:
            page, next_after = event_page(
                events=form.events(audit_scope(user=user)), after=after, size=PAGE_SIZE
            )
        except InvalidPageToken:
            problems.append(
                "Page (after): this is not a page link this console made; start again from "
                "the first page."
            )
        else:
            names = _tenant_names(e.tenant_id for e in page)
            rows = [
                _row(
                    e,
                    tenant=names[e.tenant_id],
                    addresses=user.is_staff or e.tenant_id in owned,
                )
                for e in page
            ]
            if next_after:
                next_query = _filter_query(request, form, after=next_after)
    query = _filter_query(request, form)
    return render(
        request,
        "console/audit.html",
        {
            "form": form,
            "problems": problems,
            "rows": rows,
            "valid": valid,
            "paged": bool(after),
            "next_query": next_query,
            "first_query": query,
            "export_query": query,
            "page_size": PAGE_SIZE,
            "show_tenant": user.is_staff or len(tenants) > 1,
            "can_export": valid and (user.is_staff or bool(owned)),
            "exports_own_only": not user.is_staff and len(owned) < len(tenants),
            "auth_failure": AUTH_FAILURE,
            "has_tenants": bool(tenants) or user.is_staff,
        },
    )


# --- the exports ----------------------------------------------------------------------------

CSV_COLUMNS = (
    "at",
    "tenant",
    "actor",
    "source",
    "action",
    "object_type",
    "object_id",
    "object",
    "changes",
    "reason",
    "count",
    "last_at",
    "sources",
)
# A spreadsheet reads a cell starting with one of these as a formula: such a text (a key's
# name, say) is written with a leading apostrophe, as OWASP advises.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _export_events(request: HttpRequest) -> QuerySet[AuditEvent] | HttpResponse:
    """The events an export writes (the page's filters, within what the person may export),
    or the 400 naming a bad filter. Members are refused (403) with the reason."""
    user: User = request.user
    tenants = list(tenant_scope(user=user).order_by("slug")[:MAX_TENANTS_LISTED])
    if not user.is_staff and not audit_owned_tenant_ids(user=user):
        raise PermissionDenied(
            "Only a tenant's owners (or operators) export its audit log; you are a member."
        )
    form = AuditFilterForm(request.GET, user=user, tenants=tenants)
    if not form.is_valid():
        text = "\n".join(form.problems()) + "\n"
        return HttpResponse(text, status=400, content_type="text/plain; charset=utf-8")
    return form.events(audit_export_scope(user=user))


def _records(events: QuerySet[AuditEvent]) -> Iterator[list[tuple[str, EventRecord]]]:
    """The events a keyset page at a time, each with its tenant's name."""
    for chunk in event_chunks(events):
        names = _tenant_names(e.tenant_id for e in chunk)
        yield [(names[e.tenant_id], event_record_of(e)) for e in chunk]


async def _streamed(
    events: QuerySet[AuditEvent],
    head: bytes,
    render_chunk: Callable[[list[tuple[str, EventRecord]]], bytes],
) -> AsyncIterator[bytes]:
    """The export, read a page at a time on the request's thread (where its transaction and
    connection are): a log of any length is never held whole in memory."""
    pages = _records(events)
    take = sync_to_async(lambda: next(pages, None))
    if head:
        yield head
    while (chunk := await take()) is not None:
        yield render_chunk(chunk)


def _cell(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _csv_chunk(chunk: list[tuple[str, EventRecord]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for tenant, record in chunk:
        writer.writerow(
            [
                record["at"],
                _cell(tenant),
                _cell(record["actor"]),
                _cell(record["source"]),
                record["action"],
                record["object_type"],
                _cell(record["object_id"]),
                _cell(record["object"]),
                json.dumps(record["changes"], ensure_ascii=False, sort_keys=True),
                _cell(record["reason"]),
                record["count"],
                record["last_at"] or "",
                _cell(" ".join(record["sources"])),
            ]
        )
    return out.getvalue().encode()


def _jsonl_chunk(chunk: list[tuple[str, EventRecord]]) -> bytes:
    return "".join(
        json.dumps({"tenant": tenant, **record}, ensure_ascii=False) + "\n"
        for tenant, record in chunk
    ).encode()


def _attachment(response: StreamingHttpResponse, extension: str) -> StreamingHttpResponse:
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{extension}"'
    response["Cache-Control"] = "no-store"
    return response


@login_required
def audit_csv(request: HttpRequest) -> HttpResponse:
    events = _export_events(request)
    if isinstance(events, HttpResponse):
        return events
    head = (",".join(CSV_COLUMNS) + "\n").encode()
    response = StreamingHttpResponse(
        _streamed(events, head, _csv_chunk), content_type="text/csv; charset=utf-8"
    )
    return _attachment(response, "csv")


@login_required
def audit_jsonl(request: HttpRequest) -> HttpResponse:
    events = _export_events(request)
    if isinstance(events, HttpResponse):
        return events
    response = StreamingHttpResponse(
        _streamed(events, b"", _jsonl_chunk), content_type="application/jsonl; charset=utf-8"
    )
    return _attachment(response, "jsonl")
