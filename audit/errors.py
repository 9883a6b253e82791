"""Errors of the audit log."""

from __future__ import annotations


class AuditLogAppendOnly(Exception):
    """An audit event was to be changed or deleted: the log is only added to (retention
    deletes old events, audit.services.events_delete_expired, and nothing else does)."""
