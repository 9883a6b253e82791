"""The task counts behind ListTasks' totalSize: exact through every way a task is created,
changes state or goes away, in the same transaction, and under concurrent changes."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.types import Task as TaskProto
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Count, Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.auth import Principal
from tasks_app import services
from tasks_app.errors import InvalidParamsError
from tasks_app.models import TASK_COUNT_SHARDS, Task, TaskCount, TaskEvent
from tasks_app.services import (
    task_cancel_request,
    task_claim,
    task_counts_reconcile,
    task_end,
    task_event_record,
    task_release,
    tasks_reap,
)
from tests.conftest import require
from tests.factories import task_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")
SUBMITTED, WORKING, INPUT_REQUIRED, COMPLETED, CANCELED, FAILED = (
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_FAILED",
)


def record(task_id, state):
    event = TaskStatusUpdateEvent(task_id=str(task_id), status=TaskStatus(state=state))
    return task_event_record(task_id=task_id, event=event)


def claim(task_id):
    job = Task.objects.get(pk=task_id).job_id
    assert task_claim(task_id=task_id, job_id=job) == "claimed"


def stored_counts():
    """The counts, summed over the shards, zeros left out: (owner, state) -> n per agent."""
    rows = TaskCount.objects.values("agent_id", "owner", "state").annotate(total=Sum("n"))
    return {(r["agent_id"], r["owner"], r["state"]): r["total"] for r in rows if r["total"]}


def actual_counts():
    rows = Task.objects.values("agent_id", "owner", "state").annotate(total=Count("pk"))
    return {(r["agent_id"], r["owner"], r["state"]): r["total"] for r in rows}


def assert_exact(agent, **expected):
    """The stored counts match the tasks, and the tasks are as `expected` (owner__STATE=n)."""
    assert stored_counts() == actual_counts()
    mine = {
        f"{owner.removeprefix('key:')}__{state.removeprefix('TASK_STATE_')}": n
        for (agent_id, owner, state), n in stored_counts().items()
        if agent_id == agent.pk
    }
    assert mine == expected


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "echo")


def test_counts_follow_every_state_change_including_the_platforms(agent):
    # given tasks of two owners
    a, b, c, d, e = (task_send(agent).task_id for _ in range(5))
    bobs = task_send(agent, principal=BOB).task_id
    assert_exact(agent, alice__SUBMITTED=5, bob__SUBMITTED=1)

    # when the agent works, asks, is answered and finishes (a status update, a Task event)
    claim(a)
    record(a, TaskState.TASK_STATE_WORKING)
    record(a, TaskState.TASK_STATE_WORKING)  # the same state again moves nothing
    record(a, TaskState.TASK_STATE_INPUT_REQUIRED)
    task_release(task_id=a)
    assert_exact(agent, alice__SUBMITTED=4, alice__INPUT_REQUIRED=1, bob__SUBMITTED=1)
    task_send(agent, task_id=a)  # a follow-up leaves the state to the agent
    claim(a)
    task_event_record(
        task_id=a,
        event=TaskProto(id=str(a), status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)),
    )
    task_release(task_id=a)
    # a direct Message answer completes the task
    reply = Message(message_id="r", role=Role.ROLE_AGENT, parts=[Part(text="done")])
    task_event_record(task_id=b, event=reply)
    # an event after the end is ignored, and counts nothing
    assert not record(b, TaskState.TASK_STATE_FAILED)
    assert_exact(agent, alice__SUBMITTED=3, alice__COMPLETED=2, bob__SUBMITTED=1)

    # and the platform ends tasks: a cancel before any run, a cancel honoured at release,
    # the reaper, and an end on the platform's authority
    task_cancel_request(agent=agent, principal=ALICE, task_id=str(c))
    claim(bobs)
    task_cancel_request(agent=agent, principal=BOB, task_id=str(bobs))
    task_release(task_id=bobs)
    claim(d)
    record(d, TaskState.TASK_STATE_WORKING)
    Task.objects.filter(pk=d).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert tasks_reap() == [d]
    assert task_end(task_id=e, state=TaskState.TASK_STATE_FAILED, reason="no")
    assert not task_end(task_id=e, state=TaskState.TASK_STATE_FAILED, reason="again")

    # then
    assert_exact(agent, alice__COMPLETED=2, alice__CANCELED=1, alice__FAILED=2, bob__CANCELED=1)


def test_a_batch_of_a_runs_events_is_counted_once_by_its_net_moves(agent):
    # given a claimed task
    task_id = task_send(agent).task_id
    claim(task_id)

    def status(state):
        return TaskStatusUpdateEvent(task_id=str(task_id), status=TaskStatus(state=state))

    artifact = TaskArtifactUpdateEvent(
        task_id=str(task_id), artifact=Artifact(artifact_id="a", parts=[Part(text="y")])
    )
    batch = [
        status(TaskState.TASK_STATE_WORKING),
        artifact,
        status(TaskState.TASK_STATE_INPUT_REQUIRED),
        status(TaskState.TASK_STATE_WORKING),
        status(TaskState.TASK_STATE_COMPLETED),
    ]

    # when the run's events are recorded together
    with CaptureQueriesContext(connection) as queries:
        recorded = services.task_events_record(task_id=task_id, events=batch)

    # then all are stored and the counts are exact
    assert recorded.count == 5 and recorded.released
    assert TaskEvent.objects.filter(task_id=task_id).count() == 1 + 5
    assert_exact(agent, alice__COMPLETED=1)
    # on PostgreSQL the counts move in one statement (submitted -1, completed +1: the states
    # passed through net to nothing), sent with the events and the task's update in one query
    require(connection.vendor == "postgresql", "statements sent together are PostgreSQL's")
    counted = [q["sql"] for q in queries if "tasks_app_taskcount" in q["sql"]]
    assert len(counted) == 1
    assert counted[0].count('INSERT INTO "tasks_app_taskevent"') == 5
    assert 'UPDATE "tasks_app_task" SET' in counted[0]
    assert "TASK_STATE_WORKING" not in counted[0].split("tasks_app_taskcount")[1]


def test_a_rolled_back_change_is_not_counted(agent):
    task_id = task_send(agent).task_id
    with pytest.raises(RuntimeError), transaction.atomic():
        record(task_id, TaskState.TASK_STATE_WORKING)
        raise RuntimeError("the rest of the transaction failed")
    with pytest.raises(InvalidParamsError):
        task_send(agent, new_task_id=task_id)  # a taken id: no task, so no count
    assert_exact(agent, alice__SUBMITTED=1)


def test_counts_are_spread_over_shards_by_task_id(agent):
    # given tasks chosen to land in every shard
    ids = [uuid.UUID(int=(uuid.uuid4().int >> 8 << 8) + shard) for shard in range(16)]
    for task_id in ids:
        task_send(agent, new_task_id=task_id)
    # then one row per shard, and a task's moves stay in its shard
    record(ids[3], TaskState.TASK_STATE_WORKING)
    rows = TaskCount.objects.filter(agent=agent).values_list("state", "shard", "n")
    assert sorted(rows) == sorted(
        [(SUBMITTED, s, 2) for s in range(TASK_COUNT_SHARDS) if s != 3]
        + [(SUBMITTED, 3, 1), (WORKING, 3, 1)]
    )


def test_deleting_an_agent_or_its_tenant_deletes_its_counts(make_tenant, make_agent):
    tenant, other = make_tenant(), make_tenant()
    gone, kept, also_gone = make_agent(tenant, "a"), make_agent(other, "b"), make_agent(tenant, "c")
    for agent in (gone, kept, also_gone):
        task_send(agent)
    gone.delete()
    assert set(TaskCount.objects.values_list("agent_id", flat=True)) == {kept.pk, also_gone.pk}
    tenant.delete()
    assert set(TaskCount.objects.values_list("agent_id", flat=True)) == {kept.pk}
    assert_exact(kept, alice__SUBMITTED=1)


def test_reconcile_corrects_counts_that_drifted(agent, make_agent):
    # given changes made behind the services' back (as a process of an older version would)
    ids = [task_send(agent).task_id for _ in range(3)]
    other = make_agent(agent.tenant, "other")
    task_send(other, principal=BOB)
    Task.objects.filter(pk__in=ids[:2]).update(state=COMPLETED)
    Task.objects.filter(pk=ids[2]).update(owner="key:carol")
    assert stored_counts() != actual_counts()
    # when
    assert task_counts_reconcile(agent_id=other.pk) == 0
    assert task_counts_reconcile() == 3  # alice's submitted and completed, carol's submitted
    # then
    assert_exact(agent, alice__COMPLETED=2, carol__SUBMITTED=1)
    record(ids[2], TaskState.TASK_STATE_WORKING)  # and they are kept from there on
    assert_exact(agent, alice__COMPLETED=2, carol__WORKING=1)
    call_command("task_counts_reconcile")
    assert_exact(agent, alice__COMPLETED=2, carol__WORKING=1)


@pytest.mark.django_db(transaction=True)
def test_concurrent_state_changes_neither_deadlock_nor_lose_counts(
    make_tenant, make_agent, monkeypatch
):
    require(
        connection.vendor == "postgresql",
        "row locks and their order are PostgreSQL's; SQLite has one writer",
    )
    # Sends commit here, which would queue real agent runs: the states below are the test's.
    monkeypatch.setattr(services, "enqueue_run", lambda *args: None)
    # given one owner's tasks, all in one shard, so every change below touches the same rows
    agent = make_agent(make_tenant(), "busy")
    threads_n, tasks_per_thread, rounds = 6, 2, 8
    ids = [
        task_send(agent, new_task_id=uuid.UUID(int=uuid.uuid4().int >> 3 << 3)).task_id
        for _ in range(threads_n * tasks_per_thread)
    ]
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def work(mine: list[uuid.UUID], flip: bool) -> None:
        # Half the threads move their tasks working -> input-required while the other half
        # move theirs back: the two directions that deadlock if rows are locked as they come.
        try:
            for task_id in mine:
                record(task_id, TaskState.TASK_STATE_WORKING)
                if flip:
                    record(task_id, TaskState.TASK_STATE_INPUT_REQUIRED)
            barrier.wait()
            for _ in range(rounds):
                for task_id in mine:
                    order = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_WORKING)
                    for state in order[::-1] if flip else order:
                        record(task_id, state)
            end = TaskState.TASK_STATE_COMPLETED if flip else TaskState.TASK_STATE_FAILED
            for task_id in mine:
                record(task_id, end)
        except BaseException as exc:  # reported by the test, below
            errors.append(exc)
            barrier.abort()  # nobody waits for a thread that is gone
        finally:
            connection.close()

    # when
    threads = [
        threading.Thread(
            target=work,
            args=(ids[i * tasks_per_thread : (i + 1) * tasks_per_thread], i % 2 == 0),
        )
        for i in range(threads_n)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then
    assert errors == []
    half = threads_n // 2 * tasks_per_thread
    assert_exact(agent, alice__COMPLETED=half, alice__FAILED=half)
    assert set(TaskCount.objects.filter(agent=agent).values_list("shard", flat=True)) == {0}
