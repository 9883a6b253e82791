"""manage.py celeryworker agents|push|maintenance [celery worker options]: one Celery worker
for one queue, with the pool that queue needs. `make run`, docker-compose, the tests and the
benchmark all start workers with this command, so there is one place that says how.
"""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from a2a_platform import heap
from a2a_platform.celery import app
from a2a_platform.db import use_threads
from agents.crypto import encryption_keys_check


def worker_argv(role: str) -> list[str]:
    """The `celery worker` arguments for a worker of `role`."""
    concurrency = {
        # One event loop runs the agents (tasks_app.runtime); each of the pool's threads holds
        # one run in flight, and the prefetch follows the pool's size.
        "agents": settings.A2A_WORKER_MAX_RUNS,
        "push": settings.A2A_PUSH_WORKER_CONCURRENCY,
        "maintenance": 2,  # the reaper and the push dispatcher: short database sweeps
    }[role]
    argv = ["worker", "--queues", role, "--pool", "threads", "--concurrency", str(concurrency)]
    # Celery's banner (twenty lines of configuration) only at LOG_LEVEL=DEBUG.
    return argv if settings.LOG_LEVEL == "DEBUG" else ["--quiet", *argv]


class Command(BaseCommand):
    help = (
        "Run a Celery worker for one queue: agents (agent runs on one event loop), push "
        "(webhook deliveries) or maintenance (reaper and push dispatch). Further options go "
        "to `celery worker`, e.g. --loglevel=INFO -n name@%h."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("role", choices=["agents", "push", "maintenance"])
        parser.add_argument("celery_args", nargs="*", help="passed on to `celery worker`")

    def run_from_argv(self, argv: list[str]) -> None:
        # Options after the role belong to Celery, not to Django's option parser.
        if len(argv) >= 3 and argv[2] in ("agents", "push", "maintenance"):
            self.handle(role=argv[2], celery_args=argv[3:])
            return
        super().run_from_argv(argv)

    def handle(self, *args: Any, role: str, celery_args: list[str], **options: Any) -> None:
        encryption_keys_check()
        if role == "agents":
            use_threads(settings.A2A_WORKER_DB_THREADS)
        worker_ready.connect(lambda **_: heap.freeze(f"{role} worker"), weak=False)
        app.worker_main([*worker_argv(role), *celery_args])
