"""Records every Celery job that fails, for the operators' workers page.

Celery's `task_failure` signal is the one place a worker reports a job's exception whatever the
task, so this is a signal receiver (the project's rule against signals is about business logic;
this only writes a diagnostic row). It runs in the worker process that ran the job, right after
the exception, and never raises: a failure to record must not change what happens to the job.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import task_failure
from celery.utils.saferepr import saferepr
from django.db import transaction
from django.utils import timezone

from .models import JobFailure

logger = logging.getLogger(__name__)

# The newest failures kept; older ones are deleted as new ones are written.
JOB_FAILURES_KEPT = 1000
ARGS_MAX_CHARS = 1000
MESSAGE_MAX_CHARS = 2000
TRACEBACK_MAX_CHARS = 8000


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tail(text: str, limit: int) -> str:
    """The end of a traceback is where the exception was raised: keep that part."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _exception_type(exception: BaseException) -> str:
    # Celery replaces an exception it cannot pickle by a wrapper that remembers the class name.
    wrapped = getattr(exception, "exc_cls_name", None)
    if wrapped:
        module = getattr(exception, "exc_module", "") or ""
        return f"{module}.{wrapped}" if module and module != "builtins" else str(wrapped)
    kind = type(exception)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def job_failure_record(
    *,
    celery_task_id: str,
    task_name: str,
    args_repr: str,
    kwargs_repr: str,
    exception: BaseException,
    traceback_text: str,
    worker_hostname: str,
    kept: int = JOB_FAILURES_KEPT,
) -> JobFailure:
    """Store one failure and drop all but the newest `kept` ones."""
    with transaction.atomic():
        failure = JobFailure.objects.create(
            celery_task_id=_cut(celery_task_id, 255),
            task_name=_cut(task_name, 255),
            args_repr=_cut(args_repr, ARGS_MAX_CHARS),
            kwargs_repr=_cut(kwargs_repr, ARGS_MAX_CHARS),
            exception_type=_cut(_exception_type(exception), 255),
            exception_message=_cut(str(exception), MESSAGE_MAX_CHARS),
            traceback=_tail(traceback_text, TRACEBACK_MAX_CHARS),
            worker_hostname=_cut(worker_hostname, 255),
            failed_at=timezone.now(),
        )
        # Ids grow with time, so the newest `kept` rows are those at or above the kept-th id;
        # the lookup and the delete both walk the primary key's index.
        boundary = (
            JobFailure.objects.order_by("-id").values_list("id", flat=True)[kept - 1 : kept].first()
        )
        if boundary is not None:
            JobFailure.objects.filter(id__lt=boundary).delete()
    return failure


@task_failure.connect(weak=False, dispatch_uid="console.job_failure_record")
def _on_task_failure(
    sender: Any = None,
    task_id: str | None = None,
    exception: BaseException | None = None,
    args: Any = None,
    kwargs: Any = None,
    einfo: Any = None,
    **_: Any,
) -> None:
    try:
        request = getattr(sender, "request", None)
        # A caller may have set argsrepr/kwargsrepr to hide secrets: honour them.
        args_repr = getattr(request, "argsrepr", None) or saferepr(args, maxlen=ARGS_MAX_CHARS)
        kwargs_repr = getattr(request, "kwargsrepr", None) or saferepr(
            kwargs, maxlen=ARGS_MAX_CHARS
        )
        job_failure_record(
            celery_task_id=str(task_id or ""),
            task_name=str(getattr(sender, "name", "") or ""),
            args_repr=str(args_repr),
            kwargs_repr=str(kwargs_repr),
            exception=exception if exception is not None else Exception("(no exception given)"),
            traceback_text=str(getattr(einfo, "traceback", "") or ""),
            worker_hostname=str(getattr(request, "hostname", "") or ""),
        )
    except Exception:  # recording is best effort: the job's own failure handling goes on
        logger.exception("Could not record the failure of Celery job %s", task_id)
