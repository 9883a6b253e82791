"""celery beat's liveness record: a scheduler that writes "beat ticked at <time>" to the database
every few seconds, and the readers of that record (the console's workers page and
`manage.py healthcheck beat`).

Beat is started with this scheduler (`celery -A a2a_platform beat --scheduler
a2a_platform.beat:Scheduler`, as docker-compose.yml and scripts/run.sh do). The record lives in
PostgreSQL (console.BeatHeartbeat) rather than in beat's memory, so any process can read it
and it still says when beat last ticked after beat has stopped.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from datetime import datetime
from typing import Any

from celery import beat as celery_beat
from celery.schedules import maybe_schedule
from django.conf import settings
from django.db import connections
from django.utils import timezone

logger = logging.getLogger(__name__)

# Beat writes its record at most this often (one upsert of one row).
HEARTBEAT_SECONDS = 5.0
# The record is stale once older than this many of beat's longest gaps between ticks.
STALE_AFTER_GAPS = 3


class Scheduler(celery_beat.PersistentScheduler):
    """Celery's own scheduler (its schedule file, its timing), recording that it ticks.

    The record is written on a thread of its own, so that scheduling never waits for the
    database: while the database is down a write may wait for a connection (up to the pool's
    20 s timeout), and on a network that hangs, longer; beat goes on sending the periodic
    tasks meanwhile. The thread is a daemon: a write that hangs does not hold up beat's exit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._recorded_at: float | None = None
        self._recording: threading.Thread | None = None
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval: float = super().tick(*args, **kwargs)
        now = time.monotonic()
        due = self._recorded_at is None or now - self._recorded_at >= HEARTBEAT_SECONDS
        # One write at a time: while one still waits for the database, none is started.
        if due and (self._recording is None or not self._recording.is_alive()):
            self._recorded_at = now
            self._recording = threading.Thread(
                target=_record_on_this_thread,
                kwargs={"ticked_at": timezone.now()},
                name="beat-record",
                daemon=True,
            )
            # Celery's stop signals raise SystemExit in their handler; one that lands inside
            # Thread.start()'s wait breaks its lock and beat exits with a traceback. Held
            # back for that moment, the signal is taken right after, where SystemExit is clean.
            stops = {signal.SIGINT, signal.SIGTERM, signal.SIGQUIT}
            held = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
            try:
                self._recording.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return interval


def beat_tick_record(*, ticked_at: datetime | None = None) -> bool:
    """Record that beat ticked at `ticked_at` (default: now); False when the database could not
    take it. A failure is logged and beat goes on: the record is a report, and scheduling must
    never stop because it could not be written."""
    from console.models import BeatHeartbeat

    try:
        BeatHeartbeat.objects.bulk_create(
            [
                BeatHeartbeat(
                    ticked_at=ticked_at or timezone.now(), hostname=socket.gethostname()[:255]
                )
            ],
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=["ticked_at", "hostname"],
        )
    except Exception as exc:  # any failure: beat must go on scheduling
        logger.warning(
            "beat could not record its tick, and goes on: %s: %s", type(exc).__name__, exc
        )
        return False
    return True


def _record_on_this_thread(ticked_at: datetime) -> None:
    """The recording thread: one write, then its connection goes back to the pool (or is
    closed), as the thread ends."""
    try:
        beat_tick_record(ticked_at=ticked_at)
    finally:
        try:
            connections.close_all()
        except Exception:  # a connection that broke: nothing left to tidy
            pass


def beat_last_tick() -> datetime | None:
    """When celery beat last ticked (an aware datetime), or None if no beat ever recorded a
    tick. Beat rewrites it at most every HEARTBEAT_SECONDS while it runs; one older than
    beat_stale_after_seconds() means beat has stopped, hangs, or cannot reach the database.
    Raises the database's error when the database cannot be read."""
    from console.models import BeatHeartbeat

    return (
        BeatHeartbeat.objects.filter(id=BeatHeartbeat.ONLY_ID)
        .values_list("ticked_at", flat=True)
        .first()
    )


def beat_stale_after_seconds() -> float:
    """How old beat's last tick may be while beat is taken to be alive: STALE_AFTER_GAPS times
    the longest gap between its ticks (with the defaults, 3 x 5 s).

    Beat ticks whenever an entry is due, so the gap is the shortest interval of
    settings.CELERY_BEAT_SCHEDULE (an hourly entry beside the reaper's 5 s does not make beat
    sleep an hour), and at most `beat_max_loop_interval`, which an interval longer than that (or
    a crontab entry) counts as; the record is written at most every HEARTBEAT_SECONDS, so the
    gap is never taken to be shorter than that."""
    from a2a_platform.celery import app

    max_loop = float(app.conf.beat_max_loop_interval or celery_beat.DEFAULT_MAX_INTERVAL)
    gaps = []
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        run_every = getattr(maybe_schedule(entry["schedule"]), "run_every", None)
        gaps.append(min(run_every.total_seconds(), max_loop) if run_every else max_loop)
    # An empty schedule: beat wakes every max_loop.
    return STALE_AFTER_GAPS * max(HEARTBEAT_SECONDS, min(gaps or [max_loop]))
