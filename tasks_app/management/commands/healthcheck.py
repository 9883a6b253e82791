"""manage.py healthcheck worker <queue> | beat: a container healthcheck for the Celery processes
(docker-compose.yml runs it), one line of output, exit status 0 (healthy) or 1.

`worker <queue>`: Celery's own ping of this host's worker for the queue, the node
`<queue>@<hostname>` (compose and `make run` start each worker with `-n <queue>@%h`). No
answer within --timeout, or a broker that cannot be reached, is 1.

`beat`: beat's liveness record (a2a_platform.beat). Missing, or older than
beat_stale_after_seconds() (3 x the longest interval of CELERY_BEAT_SCHEDULE), is 1; so is a
database that cannot be read, where beat cannot record its ticks either.
"""

from __future__ import annotations

from typing import Any

from celery.utils.nodenames import host_format
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

# The node name of a queue's worker: `manage.py celeryworker <queue> -n <queue>@%h`.
WORKER_NODENAME = "{queue}@%h"
DEFAULT_TIMEOUT_SECONDS = 3.0


def worker_nodename(queue: str) -> str:
    """The node name this host's worker for `queue` answers to (`%h` expanded as Celery does)."""
    return host_format(WORKER_NODENAME.format(queue=queue))


def worker_check(queue: str, timeout: float) -> tuple[bool, str]:
    from a2a_platform.celery import app

    node = worker_nodename(queue)
    try:
        with app.connection_for_write() as broker:
            # Bounded: the ping's publish would otherwise retry a broker that is down forever.
            broker.ensure_connection(max_retries=1, timeout=timeout)
            replies = app.control.ping([node], timeout=timeout, connection=broker)
    except Exception as exc:  # whatever failed is the answer
        return False, f"worker {node}: broker unreachable: {type(exc).__name__}: {exc}"
    if any(node in reply for reply in replies):
        return True, f"worker {node}: pong"
    return False, f"worker {node}: no answer within {timeout:g} s"


def beat_check() -> tuple[bool, str]:
    from a2a_platform.beat import beat_last_tick, beat_stale_after_seconds

    try:
        last = beat_last_tick()
    except Exception as exc:  # whatever failed is the answer
        return False, f"beat: database unreachable: {type(exc).__name__}: {exc}"
    if last is None:
        return False, "beat: no tick recorded (is beat running with a2a_platform.beat:Scheduler?)"
    age = (timezone.now() - last).total_seconds()
    stale_after = beat_stale_after_seconds()
    if age > stale_after:
        return False, f"beat: last tick {age:.0f} s ago, over the {stale_after:g} s limit"
    return True, f"beat: ticked {age:.1f} s ago"


class Command(BaseCommand):
    help = (
        "Exit 0 when a Celery process of this host is alive, else 1, saying why in one line: "
        "`worker <queue>` pings the queue's worker (node <queue>@<hostname>), `beat` reads "
        "beat's last recorded tick."
    )
    # A healthcheck runs every few seconds: no system checks, as little start-up as possible.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        processes = parser.add_subparsers(dest="process", required=True)
        worker = processes.add_parser("worker", help="ping this host's worker for a queue")
        worker.add_argument("queue", choices=[q.name for q in settings.CELERY_TASK_QUEUES])
        worker.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_SECONDS,
            help=f"seconds to wait for the broker and for the answer (default "
            f"{DEFAULT_TIMEOUT_SECONDS:g})",
        )
        processes.add_parser("beat", help="beat's last tick is recent")

    def handle(self, *args: Any, process: str, **options: Any) -> None:
        if process == "worker":
            healthy, line = worker_check(options["queue"], options["timeout"])
        else:
            healthy, line = beat_check()
        if not healthy:
            self.stderr.write(line)
            raise SystemExit(1)
        self.stdout.write(line)
