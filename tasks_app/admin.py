"""Tasks and their event log in the admin: read-only records, for looking, never for editing
(tasks change only through the A2A operations and the workers).

Both tables grow to millions of rows, so the lists are ordered by indexed columns, never
count a big table on every page (`EstimatedCountPaginator`), search by exact ids only, and
show related rows as links instead of loading them. States are shown as the console shows
them: the proto names (TASK_STATE_WORKING, ...).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from agents.models import Agent

from .models import Artifact, Message, Task, TaskEvent


class EstimatedCountPaginator(Paginator):
    """Counts exactly, except the unfiltered list of a big table: there it takes PostgreSQL's
    estimate of the table's rows (pg_class.reltuples, kept by autovacuum) instead of counting
    millions of rows for every page shown."""

    exact_below = 100_000

    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if (
            connection.vendor == "postgresql"
            and isinstance(rows, QuerySet)
            and not rows.query.where
        ):
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT reltuples::bigint FROM pg_class WHERE oid = %s::regclass",
                    [rows.model._meta.db_table],
                )
                estimate = cursor.fetchone()[0]
            if estimate >= self.exact_below:
                return int(estimate)
        return int(super().count)


class ReadOnlyMixin:
    """Viewing only: nothing is added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AgentListFilter(admin.RelatedFieldListFilter):
    """The agents to filter by, named tenant/slug, read in one query."""

    def field_choices(
        self, field: Any, request: HttpRequest, model_admin: admin.ModelAdmin
    ) -> list[tuple[Any, str]]:
        agents = Agent.objects.select_related("tenant").order_by("tenant__slug", "slug")
        return [(agent.pk, str(agent)) for agent in agents]


def _pretty_json(value: Any) -> str:
    return format_html('<pre class="json">{}</pre>', json.dumps(value, indent=2))


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text.strip())
    except ValueError:
        return None


class MessageInline(ReadOnlyMixin, admin.TabularInline):
    model = Message
    fields = ("position", "role", "message_id", "created_at", "content")
    readonly_fields = fields
    extra = 0

    @admin.display(description="Message")
    def content(self, message: Message) -> str:
        return _pretty_json(message.data)


class ArtifactInline(ReadOnlyMixin, admin.TabularInline):
    model = Artifact
    fields = ("position", "artifact_id", "updated_at", "content")
    readonly_fields = fields
    extra = 0

    @admin.display(description="Artifact")
    def content(self, artifact: Artifact) -> str:
        return _pretty_json(artifact.data)


@admin.register(Task)
class TaskAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "tenant", "agent", "state", "owner", "status_timestamp")
    list_filter = ("state", ("agent", AgentListFilter))
    list_select_related = ("tenant", "agent__tenant")
    # The console's order; the (agent[, state], -status_timestamp, -id) indexes serve it.
    ordering = ("-status_timestamp", "-id")
    search_fields = ("id", "context_id")
    search_help_text = "An exact task id or context id."
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = (
        "id",
        "tenant",
        "agent",
        "context_id",
        "owner",
        "state",
        "status_timestamp",
        "status",
        "metadata_json",
        "cancel_requested",
        "last_seq",
        "events",
        "running_since",
        "lease_expires_at",
        "runner",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    inlines = [MessageInline, ArtifactInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Task]:
        return super().get_queryset(request).select_related("tenant", "agent__tenant")

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Task], search_term: str
    ) -> tuple[QuerySet[Task], bool]:
        # Exact matches only: a substring search would read every task.
        term = search_term.strip()
        if not term:
            return queryset, False
        task_id = _uuid_or_none(term)
        if task_id is not None:
            return queryset.filter(pk=task_id), False
        return queryset.filter(context_id=term), False

    @admin.display(description="Status message")
    def status(self, task: Task) -> str:
        return _pretty_json(task.status_message) if task.status_message else "–"

    @admin.display(description="Metadata")
    def metadata_json(self, task: Task) -> str:
        return _pretty_json(task.metadata) if task.metadata else "–"

    @admin.display(description="Event log")
    def events(self, task: Task) -> str:
        url = reverse("admin:tasks_app_taskevent_changelist") + f"?task__exact={task.pk}"
        n = task.last_seq
        return format_html('<a href="{}">{} event{}</a>', url, n, "" if n == 1 else "s")


@admin.register(TaskEvent)
class TaskEventAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("id", "task_link", "seq", "kind", "state", "created_at")
    list_filter = ("kind",)
    # Newest first, along the primary key's index.
    ordering = ("-id",)
    search_fields = ("task__id", "task__context_id")
    search_help_text = "The exact id or context id of a task: its events."
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    fields = ("task", "seq", "kind", "state", "created_at", "event")
    readonly_fields = fields

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[TaskEvent], search_term: str
    ) -> tuple[QuerySet[TaskEvent], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        task_id = _uuid_or_none(term)
        if task_id is not None:
            return queryset.filter(task_id=task_id), False
        return queryset.filter(task__context_id=term), False

    @admin.display(description="Task", ordering="task_id")
    def task_link(self, event: TaskEvent) -> str:
        # The id only: no join to the tasks for a page of events.
        url = reverse("admin:tasks_app_task_change", args=[event.task_id])
        return format_html('<a href="{}">{}</a>', url, event.task_id)

    @admin.display(description="Event (StreamResponse)")
    def event(self, event: TaskEvent) -> str:
        return _pretty_json(event.data)
