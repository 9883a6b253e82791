"""What the console keeps itself: the recent Celery job failures operators look at, and when
beat last ticked."""

from __future__ import annotations

from django.db import models


class JobFailure(models.Model):
    """One Celery job that raised, recorded by the worker that ran it (console.signals).

    Only the newest rows are kept (JOB_FAILURES_KEPT): this is a recent-trouble view for the
    workers page, not an audit log; long texts are cut to bound each row."""

    celery_task_id = models.CharField(max_length=255, blank=True)
    task_name = models.CharField(max_length=255, blank=True)
    args_repr = models.TextField(blank=True)
    kwargs_repr = models.TextField(blank=True)
    exception_type = models.CharField(max_length=255, blank=True)
    exception_message = models.TextField(blank=True)
    traceback = models.TextField(blank=True)
    worker_hostname = models.CharField(max_length=255, blank=True)
    failed_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["-failed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.task_name} {self.celery_task_id}: {self.exception_type}"


class BeatHeartbeat(models.Model):
    """When celery beat last ticked: one row, rewritten by beat's scheduler (a2a_platform.beat)
    at most every few seconds and read by the workers page and `manage.py healthcheck beat`.

    A deployment runs one beat (two would send every periodic task twice), so one row holds
    the whole story; `hostname` says which container or machine wrote it last."""

    ONLY_ID = 1

    id = models.PositiveSmallIntegerField(primary_key=True, default=ONLY_ID, editable=False)
    ticked_at = models.DateTimeField()
    hostname = models.CharField(max_length=255, blank=True)

    def __str__(self) -> str:
        return f"beat on {self.hostname or '?'} ticked at {self.ticked_at.isoformat()}"
