"""The recorded Celery job failures in the admin: read-only, deletable to clear them (each
deletion recorded in the audit log)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit.admin import DeletionsRecorded

from .models import JobFailure


@admin.register(JobFailure)
class JobFailureAdmin(DeletionsRecorded):
    audit_object_type = "job_failure"
    list_display = ("failed_at", "task_name", "exception_type", "worker_hostname", "celery_task_id")
    list_filter = ("task_name", "exception_type")
    search_fields = ("celery_task_id", "task_name", "exception_message")
    date_hierarchy = "failed_at"
    fields = (
        "failed_at",
        "task_name",
        "celery_task_id",
        "worker_hostname",
        "exception_type",
        "exception_message",
        "args_repr",
        "kwargs_repr",
        "traceback",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
