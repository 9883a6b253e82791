"""Console routes: the audit log and its exports (CSV and JSON Lines) of the same filters."""

from django.urls import path

from . import views_audit

urlpatterns = [
    path("audit/", views_audit.audit_log, name="audit"),
    path("audit.csv", views_audit.audit_csv, name="audit-csv"),
    path("audit.jsonl", views_audit.audit_jsonl, name="audit-jsonl"),
]
