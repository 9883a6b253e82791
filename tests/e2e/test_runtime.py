"""The agent runtime on real worker processes: many runs on one event loop, cancel through the
doorbell, separate queues, and what a stopping or dying worker does with its runs.

No timings are asserted: concurrency is read from the runs' own start and end records, and
every wait is bounded only so that a broken runtime fails instead of hanging.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from a2a_platform.queues import queue_depths
from push_app.models import Delivery
from tasks_app.models import TERMINAL_STATES, Task, TaskEvent

from ..conftest import stop_process
from .helpers import Target, result_of, rpc, rpc_send, rpc_send_nonblocking, wait_until
from .webhook import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RECORDER = "tests.agents.sample_executors.SleepRecorder"


def state_of(task_id: str) -> str:
    return Task.objects.values_list("state", flat=True).get(pk=task_id)


@pytest.fixture
def own_worker(live_platform) -> Iterator[Callable[..., Any]]:
    """Replace the session's agents worker with one started here (with the given settings),
    so the test knows exactly which process runs its tasks; the session's comes back after."""
    stop_process(live_platform.worker)
    started: list[Any] = []

    def start(name: str, **env: str) -> Any:
        proc = live_platform.start_worker(name, **env)
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            stop_process(proc)
        live_platform.worker = live_platform.start_worker("worker")


def test_one_worker_process_runs_many_agent_runs_at_once(
    http, live_platform, own_worker, make_tenant, make_agent, make_key, settings
):
    settings.A2A_PYTHON_EXECUTORS = [RECORDER]
    tenant = make_tenant()
    agent = make_agent(
        tenant, "sleeper", kind="python", config={"class_path": RECORDER, "init_kwargs": {}}
    )
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    # Queued while no agents worker runs, so the runs' overlap says what the worker does, not
    # how fast this test can send.
    task_ids = [rpc_send_nonblocking(http, target, f"run {n}") for n in range(50)]
    worker = own_worker("many")
    wait_until(
        lambda: Task.objects.filter(pk__in=task_ids, state__in=TERMINAL_STATES).count() == 50,
        timeout=60,
        what="50 terminal runs",
    )
    tasks = Task.objects.filter(pk__in=task_ids)
    assert {t.state for t in tasks} == {"TASK_STATE_COMPLETED"}
    records = [json.loads(t.artifacts.get().data["parts"][0]["text"]) for t in tasks]
    assert {r["pid"] for r in records} == {worker.pid}, "every run on the one worker process"
    # The most runs in flight at one moment: sweep the runs' own start and end records.
    edges = sorted([(r["start"], 1) for r in records] + [(r["end"], -1) for r in records])
    in_flight = peak = 0
    for _, step in edges:
        in_flight += step
        peak = max(peak, in_flight)
    assert peak >= 40, f"at most {peak} of 50 runs were in flight at once"


def test_cancel_reaches_the_running_executor_through_the_doorbell(
    http, live_platform, own_worker, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 120})
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    # The database safety net looks only every 100 s: only the doorbell can be this quick.
    own_worker("bell", A2A_TASK_LEASE_SECONDS="600", A2A_WORKER_HEARTBEAT_SECONDS="100")

    task_id = rpc_send_nonblocking(http, target, "stop me")
    wait_until(
        lambda: state_of(task_id) == "TASK_STATE_WORKING", timeout=60, what="the run to start"
    )
    canceled = result_of(rpc(http, target, "CancelTask", {"id": task_id}))

    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    # The echo executor's own cancel() said so (no status message); the platform's fallback
    # after A2A_CANCEL_TIMEOUT_SECONDS would have left "did not stop within ...".
    assert "message" not in canceled["status"], canceled["status"]
    task = Task.objects.get(pk=task_id)
    assert task.running_since is None and task.runner == ""


def _event_transactions(task_id: str) -> list[tuple[str, str, int]]:
    """The task's events in order: kind, state, and the transaction that wrote each (xmin)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT kind, state, xmin::text::bigint FROM {TaskEvent._meta.db_table} "
            "WHERE task_id = %s ORDER BY seq",
            [task_id],
        )
        return cursor.fetchall()


def test_events_enqueued_together_are_written_in_one_transaction_that_ends_the_run(
    http, live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    task = rpc_send(http, target, "together")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"

    events = _event_transactions(task["id"])
    submitted, *run = events
    # The web wrote `submitted`; the run's three events (working, the artifact, completed),
    # enqueued without the executor waiting in between, went to the database together.
    assert [(kind, state) for kind, state, _ in run] == [
        ("status_update", "TASK_STATE_WORKING"),
        ("artifact_update", "TASK_STATE_WORKING"),
        ("status_update", "TASK_STATE_COMPLETED"),
    ], events
    assert len({xid for _, _, xid in run}) == 1, events
    assert submitted[2] != run[0][2]
    # The event that ended the task also ended the run's hold on it, in that same transaction:
    # nothing updated the row after it.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT xmin::text::bigint, running_since, runner FROM {Task._meta.db_table} "
            "WHERE id = %s",
            [task["id"]],
        )
        xid, running_since, runner = cursor.fetchone()
    assert (running_since, runner) == (None, "")
    assert xid == run[0][2]


def test_an_invalid_event_keeps_what_came_before_and_fails_the_run(
    http, live_platform, make_tenant, make_agent, make_key, settings
):
    executor = "tests.agents.sample_executors.InvalidAfterWork"
    settings.A2A_PYTHON_EXECUTORS = [executor]
    tenant = make_tenant()
    agent = make_agent(tenant, "midway", kind="python", config={"class_path": executor})
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    task = rpc_send(http, target, "go")["task"]

    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    reason = task["status"]["message"]["parts"][0]["text"]
    assert reason == "The agent failed: The agent sent a status update without a state.", reason
    # Working and the artifact were stored; the invalid update and the `complete` after it
    # were not; the platform's failure came last.
    assert [a["artifactId"] for a in task["artifacts"]] and task["artifacts"][0]["name"] == "half"
    kinds = [(kind, state) for kind, state, _ in _event_transactions(task["id"])]
    assert kinds == [
        ("task", "TASK_STATE_SUBMITTED"),
        ("status_update", "TASK_STATE_WORKING"),
        ("artifact_update", "TASK_STATE_WORKING"),
        ("status_update", "TASK_STATE_FAILED"),
    ], kinds


def test_a_push_delivery_proceeds_while_the_agent_queue_is_saturated(
    http, live_platform, own_worker, make_tenant, make_agent, make_key, tmp_path
):
    tenant = make_tenant()
    agent = make_agent(tenant, "busy", config={"delay_seconds": 120}, push_notifications=True)
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    own_worker("small", A2A_WORKER_MAX_RUNS="2")
    receiver = Receiver(directory=tmp_path / "webhooks").start()
    try:
        running = [rpc_send_nonblocking(http, target, f"hold {n}") for n in range(2)]
        wait_until(
            lambda: Task.objects.filter(pk__in=running, running_since__isnull=False).count() == 2,
            timeout=60,
            what="both run slots taken",
        )
        waiting = [rpc_send_nonblocking(http, target, f"wait {n}") for n in range(3)]
        assert queue_depths()["agents"] >= 1, "the agent queue has jobs no one can take"

        # A task stuck behind them gets a push config, and is canceled (it never ran): that
        # status event is delivered by the push worker while the agent queue stays full.
        watched = waiting[-1]
        result_of(
            rpc(
                http,
                target,
                "CreateTaskPushNotificationConfig",
                {"taskId": watched, "id": "hook", "url": receiver.url + "/hook"},
            )
        )
        result_of(rpc(http, target, "CancelTask", {"id": watched}))
        delivered = wait_until(lambda: receiver.requests(), timeout=60, what="the push delivery")
        assert delivered[0].json()["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
        # The receiver has the POST a moment before the push worker records its answer.
        wait_until(
            lambda: Delivery.objects.get(config__task_id=watched).state == Delivery.State.DELIVERED,
            timeout=30,
            what="the delivery recorded as delivered",
        )
        assert queue_depths()["agents"] >= 1, "the agent queue was still saturated"
        assert Task.objects.filter(pk__in=running, running_since__isnull=False).count() == 2
    finally:
        receiver.stop()
        for task_id in [*running, *waiting]:
            if state_of(task_id) not in TERMINAL_STATES:
                result_of(rpc(http, target, "CancelTask", {"id": task_id}))


def test_a_sigtermed_worker_hands_its_runs_back(
    http, live_platform, own_worker, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "long", config={"delay_seconds": 3})
    target = Target(live_platform.agent_url(agent), make_key(tenant), agent)
    leaving = own_worker("leaving", A2A_WORKER_GRACE_SECONDS="0.5")

    task_id = rpc_send_nonblocking(http, target, "finish me elsewhere")
    wait_until(
        lambda: state_of(task_id) == "TASK_STATE_WORKING", timeout=60, what="the run to start"
    )
    first_runner = Task.objects.get(pk=task_id).runner
    assert first_runner
    leaving.send_signal(signal.SIGTERM)
    assert leaving.wait(timeout=60) == 0
    log = (live_platform.log_dir / "leaving.log").read_text()
    assert "Handing back 1 unfinished runs" in log

    task = Task.objects.get(pk=task_id)
    assert task.state == "TASK_STATE_WORKING" and task.running_since is None
    assert task.job_id, "the task waits for its job again"
    own_worker("staying")
    wait_until(
        lambda: state_of(task_id) == "TASK_STATE_COMPLETED",
        timeout=60,
        what="the run on a new worker",
    )
    task = Task.objects.get(pk=task_id)
    assert task.artifacts.get().data["parts"][0]["text"] == "finish me elsewhere"
    working = TaskEvent.objects.filter(task_id=task_id, state="TASK_STATE_WORKING").count()
    assert working >= 2, "the second worker ran the agent again from the message"
