"""A run whose database connection is ended under it, on the real worker and PostgreSQL.

The fault suite restarts PostgreSQL (faults/suite.py, `postgres-restart`); with the pool's
connection check, the runs' writes mostly wait for it. What remains is a write in flight at
the moment its session ends. Here that moment is made certain: the test holds the task's row,
so the run's last write waits on it, and ends that session as a restart would
(`pg_terminate_backend`: "terminating connection due to administrator command").
"""

from __future__ import annotations

import httpx
import psycopg
import pytest
from django.db import connection

from tasks_app.models import Task, TaskEvent

from .helpers import poll, raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def end_the_session_of_the_runs_last_write(task_id: str) -> None:
    """Hold the task's row until the run's write waits on it, then end that write's session."""
    params = connection.get_connection_params()
    with psycopg.connect(**params) as holder, psycopg.connect(**params, autocommit=True) as admin:
        holder.execute("SELECT 1 FROM tasks_app_task WHERE id = %s FOR UPDATE", [task_id])
        mine = holder.info.backend_pid

        def waiting() -> list[int]:
            """The write's session: it locks the row first (a heartbeat's UPDATE of the
            lease may wait on it too, and is left be)."""
            rows = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND pid <> %s AND query LIKE '%%FOR UPDATE%%'",
                [mine],
            ).fetchall()
            return [row[0] for row in rows]

        assert poll(lambda: bool(waiting()), timeout=15, pause=0.05)
        for pid in waiting():
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        holder.rollback()


@pytest.mark.parametrize("worker_loss", ["retry", "fail"])
def test_a_run_whose_write_loses_the_database_is_handed_back_by_its_agents_policy(
    live_platform, make_tenant, make_agent, make_key, worker_loss
):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 1.0}, worker_loss=worker_loss)
    url, key = live_platform.agent_url(agent), make_key(tenant)
    sent = httpx.post(
        url,
        headers={"X-API-Key": key, "A2A-Version": "1.0"},
        json=raw_send("through a restart", return_immediately=True),
    )
    task_id = sent.json()["result"]["task"]["id"]
    # The run has said it works, and sleeps a second before its artifact and its end.
    assert poll(
        lambda: Task.objects.get(pk=task_id).state == "TASK_STATE_WORKING", timeout=15, pause=0.05
    )
    end_the_session_of_the_runs_last_write(task_id)

    ended = {"retry": "TASK_STATE_COMPLETED", "fail": "TASK_STATE_FAILED"}[worker_loss]
    assert poll(lambda: Task.objects.get(pk=task_id).state == ended, timeout=30, pause=0.1)
    task = Task.objects.get(pk=task_id)
    assert task.running_since is None and task.runner == ""
    said = [
        e.data["statusUpdate"]["status"]["message"]["parts"][0]["text"]
        for e in TaskEvent.objects.filter(task_id=task_id, kind="status_update").order_by("seq")
        if "message" in e.data["statusUpdate"]["status"]
    ]
    lost = (
        "The run lost its database connection (OperationalError: terminating connection due "
        "to administrator command)"
    )
    if worker_loss == "retry":
        # Attempt 2 ran the turn again and completed it; attempt 1's cut write left nothing.
        assert task.attempt == 2
        assert f"{lost}; the run starts again (attempt 2 of 3)." in said
        artifacts = TaskEvent.objects.filter(task_id=task_id, kind="artifact_update").count()
        assert artifacts == 1
    else:
        assert said[-1] == f"{lost}; the platform failed the task."
    got = httpx.post(
        url,
        headers={"X-API-Key": key, "A2A-Version": "1.0"},
        json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
    ).json()
    assert got["result"]["status"]["state"] == ended
