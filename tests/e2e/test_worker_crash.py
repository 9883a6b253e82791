"""A worker killed mid-task: the reaper, run by Celery, fails the task with a reason."""

from __future__ import annotations

import signal

import pytest
from a2a.types import TaskState

from a2a_platform.celery import app
from tasks_app.models import Task

from ..conftest import stop_process
from .helpers import poll, raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def send_then_kill_its_worker(live_platform, url: str, key: str, text: str) -> str:
    """Send `text` (non-blocking) while a worker with a 1 s lease is the only one, SIGKILL that
    worker once it runs the task, and bring the session's worker back; the task's id."""
    import httpx

    stop_process(live_platform.worker)  # the victim must be the only worker
    victim = live_platform.start_worker("victim", A2A_TASK_LEASE_SECONDS="1")
    try:
        response = httpx.post(
            url,
            headers={"X-API-Key": key, "A2A-Version": "1.0"},
            json=raw_send(text, return_immediately=True),
        )
        task_id = response.json()["result"]["task"]["id"]
        assert poll(
            lambda: Task.objects.filter(pk=task_id, running_since__isnull=False).exists(),
            timeout=10,
            pause=0.05,
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    finally:
        stop_process(victim)
        live_platform.worker = live_platform.start_worker("worker")
    return task_id


def test_task_of_a_killed_worker_is_failed_by_the_reaper(
    live_platform, make_tenant, make_agent, make_key
):
    import httpx

    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 120})
    url, key = live_platform.agent_url(agent), make_key(tenant)
    task_id = send_then_kill_its_worker(live_platform, url, key, "work forever")

    def reaped() -> bool:
        app.send_task("tasks_app.tasks.reap_stuck_tasks_task")
        return poll(
            lambda: Task.objects.get(pk=task_id).state == "TASK_STATE_FAILED",
            timeout=1,
            pause=0.1,
        )

    assert poll(reaped, timeout=6, pause=0.2)
    got = httpx.post(
        url,
        headers={"X-API-Key": key, "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
    ).json()
    status = got["result"]["status"]
    assert status["state"] == TaskState.Name(TaskState.TASK_STATE_FAILED)
    assert "stopped responding" in status["message"]["parts"][0]["text"]


def test_a_job_the_broker_lost_is_queued_again(live_platform, make_tenant, make_agent, make_key):
    from datetime import timedelta

    import httpx
    from django.utils import timezone

    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    url, key = live_platform.agent_url(agent), make_key(tenant)
    stop_process(live_platform.worker)  # nobody consumes while we lose the job
    try:
        response = httpx.post(
            url,
            headers={"X-API-Key": key, "A2A-Version": "1.0"},
            json=raw_send("not lost", return_immediately=True),
        )
        task_id = response.json()["result"]["task"]["id"]
        assert app.control.purge() >= 1  # the broker forgets the queued run
        Task.objects.filter(pk=task_id).update(job_queued_at=timezone.now() - timedelta(hours=1))
    finally:
        live_platform.worker = live_platform.start_worker("worker")
    app.send_task("tasks_app.tasks.reap_stuck_tasks_task")
    assert poll(
        lambda: Task.objects.get(pk=task_id).state == "TASK_STATE_COMPLETED",
        timeout=10,
        pause=0.05,
    )
    assert Task.objects.get(pk=task_id).artifacts.get().data["parts"][0]["text"] == "not lost"


def test_a_retry_agents_run_starts_again_on_another_worker_after_its_worker_dies(
    live_platform, make_tenant, make_agent, make_key, settings
):
    """Agent.worker_loss "retry": the run of a SIGKILLed worker starts again on another, which
    tells the executor it is attempt 2; the task says so in its log, and completes."""
    import json

    recorder = "tests.agents.sample_executors.SleepRecorder"
    settings.A2A_PYTHON_EXECUTORS = [recorder]
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "retrying",
        kind="python",
        config={"class_path": recorder, "init_kwargs": {"seconds": 3}},
        worker_loss="retry",
        worker_loss_attempts=2,
    )
    url, key = live_platform.agent_url(agent), make_key(tenant)
    task_id = send_then_kill_its_worker(live_platform, url, key, "again")

    def finished() -> bool:
        app.send_task("tasks_app.tasks.reap_stuck_tasks_task")
        return poll(
            lambda: Task.objects.get(pk=task_id).state == "TASK_STATE_COMPLETED",
            timeout=2,
            pause=0.1,
        )

    assert poll(finished, timeout=30, pause=0.2)
    task = Task.objects.get(pk=task_id)
    record = json.loads(task.artifacts.get().data["parts"][0]["text"])
    assert record["attempt"] == 2 and task.attempt == 2
    notes = [
        e.data["statusUpdate"]["status"]["message"]["parts"][0]["text"]
        for e in task.events.filter(kind="status_update")
        if "message" in e.data["statusUpdate"]["status"]
    ]
    assert any("attempt 2 of 2" in note for note in notes), notes
