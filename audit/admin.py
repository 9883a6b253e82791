"""The audit log in the admin: read-only, searchable, filtered by action, kind of object, tenant
and time. And a mixin for the admins of what the log does not watch (push configs, deliveries,
recorded job failures), so that a deletion made there is recorded too."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import ObjectDoesNotExist
from django.db import models, transaction
from django.http import HttpRequest
from django.utils.html import format_html

from .models import AuditEvent
from .services import event_record


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = (
        "at",
        "tenant_slug",
        "actor",
        "source",
        "action",
        "object_type",
        "object_label",
        "count",
    )
    list_filter = ("action", "object_type", "tenant")
    search_fields = ("actor", "object_label", "object_id", "reason", "source")
    date_hierarchy = "at"
    ordering = ("-at", "-pk")
    list_select_related = ("tenant",)
    fields = (
        "at",
        "tenant_slug",
        "actor",
        "actor_user",
        "source",
        "action",
        "object_type",
        "object_id",
        "object_label",
        "changes_json",
        "reason",
        "count",
        "last_at",
        "sources",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # viewing only: the log is append-only

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # retention deletes old events, nothing else

    @admin.display(description="Tenant", ordering="tenant_id")
    def tenant_slug(self, event: AuditEvent) -> str:
        if event.tenant_id is None:
            return "(platform)"
        try:
            tenant = event.tenant
        except ObjectDoesNotExist:
            tenant = None
        return tenant.slug if tenant is not None else f"#{event.tenant_id} (deleted)"

    @admin.display(description="Changes (field: [before, after])")
    def changes_json(self, event: AuditEvent) -> str:
        text = json.dumps(event.changes or {}, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html("<pre>{}</pre>", text)


class DeletionsRecorded(admin.ModelAdmin):
    """An admin whose deletions are recorded in the audit log, for models it does not watch
    (A2A clients make them on the hot paths, where no receiver may listen): one event per
    object deleted, in the deletion's transaction."""

    audit_object_type = ""

    def audit_tenant_id(self, obj: Any) -> int | None:
        """The tenant the object is of (None: the platform's)."""
        return None

    def _deleted(self, obj: models.Model) -> None:
        event_record(
            tenant_id=self.audit_tenant_id(obj),
            action="delete",
            object_type=self.audit_object_type or obj._meta.model_name or "",
            object_id=str(obj.pk),
            object_label=str(obj),
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._deleted(obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                self._deleted(obj)
            super().delete_queryset(request, queryset)
