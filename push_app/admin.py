"""Push configs and deliveries in the admin: read-only records, and redelivery of dead ones.
Deleting them here is recorded in the audit log (audit.admin.DeletionsRecorded)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from audit.admin import DeletionsRecorded

from .delivery import delivery_redeliver
from .models import Delivery, DeliveryAttempt, PushConfig


@admin.register(PushConfig)
class PushConfigAdmin(DeletionsRecorded):
    audit_object_type = "push_config"
    list_display = ("config_id", "task", "url", "dialect", "created_at")
    search_fields = ("config_id", "url", "task__id")
    # The token and credentials are encrypted; the admin never shows them.
    fields = ("task", "config_id", "url", "auth_scheme", "dialect", "event_kinds", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def audit_tenant_id(self, obj: PushConfig) -> int | None:
        return obj.task.tenant_id


class AttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = ("started_at", "status_code", "latency_ms", "outcome", "error")
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Delivery)
class DeliveryAdmin(DeletionsRecorded):
    audit_object_type = "delivery"
    list_display = ("config", "seq", "state", "attempts", "last_status_code", "next_attempt_at")
    list_filter = ("state",)
    search_fields = ("config__config_id", "config__url", "config__task__id")
    fields = (
        "config",
        "seq",
        "state",
        "attempts",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "delivered_at",
    )
    readonly_fields = fields
    inlines = [AttemptInline]
    actions = ["redeliver"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def audit_tenant_id(self, obj: Delivery) -> int | None:
        return obj.config.task.tenant_id

    @admin.action(description="Redeliver the selected dead deliveries")
    def redeliver(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        done = sum(delivery_redeliver(delivery_id=d.pk) for d in queryset)
        skipped = queryset.count() - done
        level: Any = messages.SUCCESS if done else messages.WARNING
        self.message_user(
            request, f"{done} queued again; {skipped} were not dead and were left alone.", level
        )
