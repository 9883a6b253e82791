"""What the console keeps itself: the recent Celery job failures operators look at."""

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
