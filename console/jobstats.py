"""Per-kind job counts and durations for the workers page, kept by each worker in memory.

Every worker runs its jobs on a thread pool in one process (tasks_app celeryworker), so Celery's
`task_prerun` and `task_postrun` signals fire in the process that answers control broadcasts:
the counters live there, cost a dict update per job, and are read by the `job_stats` inspect
command the workers page broadcasts beside Celery's own `stats`. They start again at zero when
the worker does, like Celery's own per-kind totals.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from celery.signals import task_postrun, task_prerun
from celery.worker.control import inspect_command

_lock = threading.Lock()
_started: dict[str, float] = {}
# kind -> [finished, failed, total seconds, longest seconds]
_kinds: dict[str, list[float]] = {}


@task_prerun.connect(weak=False, dispatch_uid="console.jobstats.prerun")
def _on_prerun(task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _started[task_id] = time.monotonic()


@task_postrun.connect(weak=False, dispatch_uid="console.jobstats.postrun")
def _on_postrun(
    task_id: str | None = None, task: Any = None, state: str | None = None, **_: Any
) -> None:
    began = _started.pop(task_id or "", None)
    if began is None:
        return
    seconds = time.monotonic() - began
    with _lock:
        row = _kinds.setdefault(str(getattr(task, "name", "") or "?"), [0, 0, 0.0, 0.0])
        row[0] += 1
        row[1] += state == "FAILURE"
        row[2] += seconds
        row[3] = max(row[3], seconds)


def job_stats_snapshot() -> dict[str, dict[str, float]]:
    with _lock:
        return {
            kind: {
                "finished": int(finished),
                "failed": int(failed),
                "mean_seconds": total / finished if finished else 0.0,
                "max_seconds": longest,
            }
            for kind, (finished, failed, total, longest) in _kinds.items()
        }


@inspect_command()
def job_stats(state: Any) -> dict[str, Any]:
    """Jobs finished by this worker since it started, per kind: counts and durations."""
    return {"kinds": job_stats_snapshot(), "running": len(_started)}
