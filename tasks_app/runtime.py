"""The agent runtime of a worker process: one asyncio event loop hosting many agent runs.

Celery stays the queue. An `agents` worker runs Celery's `threads` pool with one thread per
run in flight (`A2A_WORKER_MAX_RUNS`, the prefetch follows it); each thread hands its job to
this process's event loop and waits, so acks_late, retries, routing and `inspect active` work
as for any Celery task, while the runs themselves share one loop and spend their time awaiting.
ORM work goes to the process's bounded database threads (a2a_platform.db).

Around the runs the loop keeps:
- a heartbeat: every `A2A_WORKER_HEARTBEAT_SECONDS` one UPDATE renews the leases of all the
  worker's runs, and one read finds cancel requests the doorbell did not deliver;
- a cancel doorbell: the worker listens on its own channel-layer group, which a cancel request
  rings with the task's id, so the executor is cancelled within a moment;
- a drain: on SIGTERM (Celery's warm shutdown) no new run starts, the runs in flight get
  `A2A_WORKER_GRACE_SECONDS` to finish, then each unfinished one is handed back to the queue;
- a database that goes away (a restart, a failover): a run that loses it is handed back as
  its agent's `worker_loss` policy says, and the runtime's own writes (the claim, the
  hand-back, the release) are made again until the database answers, for up to
  `DATABASE_WAIT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from a2a.types import TaskState
from django.conf import settings

from a2a_platform.db import DATABASE_WAIT_SECONDS, database_lost, db, fair_key
from agents import usage

from .doorbell import Subscription, runner_group, shared_layer
from .execution import HandedBack, Stop, cancel_outside_run, claim, run
from .lanes import Lane, promote
from .models import Task
from .services import (
    task_end,
    task_handback,
    task_job_requeue,
    task_release,
    tasks_cancel_requested,
    tasks_heartbeat,
)

logger = logging.getLogger(__name__)
R = TypeVar("R")


def _runner_id() -> str:
    host = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40]
    return f"{host}.{os.getpid()}.{uuid.uuid4().hex[:8]}"


class Runtime:
    def __init__(self) -> None:
        self.runner = _runner_id()
        self.loop = asyncio.new_event_loop()
        self.stops: dict[uuid.UUID, Stop] = {}  # the runs in flight; touched only in the loop
        self.draining = False
        self._thread = threading.Thread(
            target=self._serve, name=f"a2a-runtime-{self.runner}", daemon=True
        )
        self._thread.start()
        logger.info("Agent runtime %s started", self.runner)

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.create_task(self._heartbeat())
        self.loop.create_task(self._listen_for_cancels())
        self.loop.run_forever()

    # --- called from Celery's threads ---------------------------------------------------

    def run_job(self, **job: Any) -> str:
        """Run one job on the loop and wait for it (the calling thread holds the job)."""
        future: Future[str] = asyncio.run_coroutine_threadsafe(self._job(**job), self.loop)
        return future.result()

    def cancel_outside_run(self, *, task_id: uuid.UUID) -> str:
        """Run an executor's cancel() for a task that no run holds, on the loop, and wait."""
        coroutine = cancel_outside_run(task_id)
        future: Future[str] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result()

    def drain(self, grace: float) -> None:
        """Take no new runs; hand back those still running after `grace` seconds."""
        self.loop.call_soon_threadsafe(self._drain, grace)

    # --- on the loop ----------------------------------------------------------------------

    async def _job(
        self,
        *,
        task_id: uuid.UUID,
        job_id: str,
        position: int,
        configuration: dict[str, Any],
        extensions: list[str],
    ) -> str:
        job_args = {"position": position, "configuration": configuration, "extensions": extensions}
        if self.draining:
            # Not claimed: queue the job again for a worker that is staying.
            await db(task_job_requeue)(task_id=task_id, job_id=job_id, job_args=job_args)
            return "handed back"
        if task_id in self.stops:
            return "busy"  # this worker still runs the task's previous turn
        # Listening before the claim: a cancel rung as soon as the claim commits is not missed.
        stop = self.stops[task_id] = Stop()
        metered: usage.RunMeter | None = None
        try:
            outcome, loaded = await _until_written(
                claim, task_id=task_id, job_id=job_id, runner=self.runner, position=position
            )
            if loaded is None:
                return outcome
            agent = loaded[0].agent  # loaded with the task: no database hop
            # The run's database work takes turns with other tenants' runs (a2a_platform.db).
            fair_key.set(agent.tenant_id)
            # A run is a claimed job, counted from its claim to its release (agents.usage).
            metered = usage.run_metered(tenant_id=agent.tenant_id, agent_id=agent.pk)
            try:
                released = await run(task_id, loaded, configuration, extensions, stop)
            except HandedBack as back:
                return await self._hand_back(task_id, job_id, job_args, back.lost)
            except Exception as exc:
                if database_lost(exc):  # a write of the platform's own in the run
                    return await self._hand_back(task_id, job_id, job_args, exc)
                # Whatever else broke outside the executor (the platform), the task must not
                # be left working with no run behind it.
                logger.exception("Run of task %s failed", task_id)
                await _until_written(
                    task_end,
                    task_id=task_id,
                    state=TaskState.TASK_STATE_FAILED,
                    reason=f"The platform could not run the agent ({type(exc).__name__}: {exc}).",
                )
                released = False
            if not released:  # the run's last write did not end the task (and release it)
                await _until_written(
                    task_release, task_id=task_id, executor_returned=True, runner=self.runner
                )
            await _hand_over(loaded[0])
            return outcome
        finally:
            del self.stops[task_id]
            if metered is not None:
                metered.end()

    async def _hand_back(
        self,
        task_id: uuid.UUID,
        job_id: str,
        job_args: dict[str, Any],
        lost: BaseException | None,
    ) -> str:
        if lost is not None:
            logger.warning("Run of task %s lost the database: %s", task_id, _first_line(lost))
        handed = await _until_written(
            task_handback,
            task_id=task_id,
            job_id=job_id,
            job_args=job_args,
            runner=self.runner,
            lost="" if lost is None else f"{type(lost).__name__}: {_first_line(lost)}",
        )
        logger.info("Task %s %s", task_id, "handed back" if handed else "not handed back")
        return "handed back" if handed else "ended"

    def _stop(self, task_id: uuid.UUID, reason: str) -> None:
        stop = self.stops.get(task_id)
        if stop is not None:
            stop.request(reason)

    def _drain(self, grace: float) -> None:
        if self.draining:
            return
        self.draining = True
        logger.info("Worker stopping: %d runs in flight get %g s to finish", len(self.stops), grace)

        def hand_back() -> None:
            if self.stops:
                logger.warning("Handing back %d unfinished runs", len(self.stops))
            for task_id in list(self.stops):
                self._stop(task_id, Stop.HANDBACK)

        self.loop.call_later(grace, hand_back)

    async def _heartbeat(self) -> None:
        await self._watch(settings.A2A_WORKER_HEARTBEAT_SECONDS, tasks_heartbeat, "Heartbeat")

    async def _poll_for_cancels(self) -> None:
        """Without a doorbell, read the cancel flags of this worker's runs as often as waiters
        poll the event log: one indexed read per worker, not one per run."""
        await self._watch(settings.A2A_POLL_INTERVAL_SECONDS, tasks_cancel_requested, "Poll")

    async def _watch(
        self, interval: float, read: Callable[..., list[uuid.UUID]], what: str
    ) -> None:
        """Every `interval` while runs are in flight: `read` which of them to cancel."""
        while True:
            await asyncio.sleep(interval)
            if not self.stops:
                continue
            try:
                canceled = await db(read, own_lane=True)(
                    runner=self.runner, task_ids=list(self.stops)
                )
            except Exception:
                logger.warning("%s of %s failed; retrying", what, self.runner, exc_info=True)
                continue
            for task_id in canceled:
                self._stop(task_id, Stop.CANCEL)

    async def _listen_for_cancels(self) -> None:
        if shared_layer() is None:
            await self._poll_for_cancels()  # no cross-process doorbell (the embedded profile)
            return
        while True:
            async with Subscription(runner_group(self.runner)) as bell:
                async for message in bell.messages(rejoin=3):
                    if message.get("type") == "task.cancel":
                        self._stop(uuid.UUID(message["task"]), Stop.CANCEL)
            # Redis away: the heartbeat covers cancels until it is back.
            await asyncio.sleep(settings.A2A_WORKER_HEARTBEAT_SECONDS)


_runtime: Runtime | None = None
_lock = threading.Lock()


def runtime() -> Runtime:
    """This process's runtime, started on first use."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = Runtime()
        return _runtime


def drain(grace: float | None = None) -> None:
    """Start draining, if this process has a runtime (Celery's warm shutdown calls this)."""
    if _runtime is not None:
        _runtime.drain(settings.A2A_WORKER_GRACE_SECONDS if grace is None else grace)


async def _hand_over(task: Task) -> None:
    """A run of the task's tenant ended: the next one waiting in its lane may go
    (tasks_app.lanes). Not asked when the run's last write, which ended the task, read that
    no run of the tenant waited (`task_events_record`, in the same round trip), unless the
    tenant has a cap (its runs all start through its lane); a run that ended otherwise (asking
    for input, failed, canceled) always asks. A hand-over that fails is made by the reaper's
    round."""
    agent = task.agent  # with its tenant's limits (agents.cache.agent_by_pk)
    lane = Lane.of(agent)
    if not lane.on or not (lane.exact or getattr(task, "lane_waiting", True)):
        return
    try:
        await db(promote)(tenant_id=agent.tenant_id, agent=agent)
    except Exception:
        logger.warning("Handing over the lane of tenant %s failed", agent.tenant_id, exc_info=True)


async def _until_written(func: Callable[..., R], /, **kwargs: Any) -> R:
    """`func(**kwargs)` on the database threads, made again while the database is lost, for up
    to `DATABASE_WAIT_SECONDS` (the pool waits for a connection meanwhile). Each of the
    runtime's writes is safe to make again: a claim knows its own, a hand-back or a release
    acts only on the worker's own run (a hand-back that had committed queues its job again),
    an end leaves an ended task as it is. Past the wait the run is let go: its row, which the
    heartbeat no longer renews, lapses, and the reaper takes it over."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DATABASE_WAIT_SECONDS
    pause = 0.25
    while True:
        try:
            return await db(func)(**kwargs)
        except Exception as exc:
            if not database_lost(exc) or loop.time() + pause > deadline:
                raise
            logger.warning("%s waits for the database: %s", func.__name__, _first_line(exc))
        await asyncio.sleep(pause)
        pause = min(pause * 2, 4.0)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]
