"""tasks_app.rowsql writes and reads the rows the ORM would: every column of an INSERT, an
UPDATE of the named fields and the auto_now ones only, a locked read equal to the ORM's."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tasks_app import rowsql
from tasks_app.models import Task, TaskEvent
from tests.conftest import require

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _postgresql() -> None:
    # Elsewhere rowsql is the ORM itself (SQLite has no FOR UPDATE); the SQL is PostgreSQL's.
    require(connection.vendor == "postgresql", "PostgreSQL (DATABASE_URL)")


NOW = timezone.now()


def _task(agent, **fields) -> Task:
    values = {
        "id": uuid.uuid4(),
        "tenant_id": agent.tenant_id,
        "agent": agent,
        "context_id": "ctx",
        "owner": "key:alice",
        "state": "TASK_STATE_SUBMITTED",
        "status_timestamp": NOW,
        "metadata": {"a": [1, {"b": None}]},
        "job_args": {"position": 0},
    }
    return Task(**{**values, **fields})


def _columns(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


def _row(model, pk) -> dict:
    return _columns(model.objects.get(pk=pk))


def test_an_insert_writes_every_column_as_save_does(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    mine, theirs = _task(agent), _task(agent)
    rowsql.insert(mine)
    theirs.save(force_insert=True)
    ours, orms = _row(Task, mine.pk), _row(Task, theirs.pk)
    for row in (ours, orms):
        row.pop("id")
        assert row.pop("created_at") and row.pop("updated_at")
    assert ours == orms
    assert not mine._state.adding

    event = rowsql.insert(
        TaskEvent(task=mine, seq=1, kind="task", state="TASK_STATE_SUBMITTED", data={"x": 1})
    )
    assert isinstance(event.pk, int)  # the database numbered it, as save() reads it back
    stored = TaskEvent.objects.get(pk=event.pk)
    assert (stored.seq, stored.kind, stored.data, stored.created_at is not None) == (
        1,
        "task",
        {"x": 1},
        True,
    )


def test_an_update_writes_the_named_fields_and_updated_at_only(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    task = rowsql.insert(_task(agent))
    before = Task.objects.get(pk=task.pk)
    task.state = "TASK_STATE_WORKING"
    task.status_message = {"role": "ROLE_AGENT", "parts": [{"text": "hi"}]}
    task.owner = "key:mallory"  # changed in memory, not named: stays as stored
    rowsql.update(task, ("state", "status_message"))
    after = Task.objects.get(pk=task.pk)
    assert (after.state, after.status_message) == (task.state, task.status_message)
    assert after.owner == "key:alice"
    assert after.updated_at > before.updated_at


def test_a_locked_read_is_the_orms_row(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    task = rowsql.insert(
        _task(agent, status_message={"k": "v"}, lease_expires_at=timezone.now() + timedelta(1))
    )
    with transaction.atomic():
        locked = rowsql.lock(Task, task.pk)
        orm = Task.objects.select_for_update().get(pk=task.pk)
    assert _columns(locked) == _columns(orm)
    assert not locked._state.adding
    assert rowsql.lock(Task, uuid.uuid4()) is None


def test_an_append_numbers_rows_after_the_last_and_never_twice(make_tenant, make_agent):
    from tasks_app.models import Artifact

    agent = make_agent(make_tenant())
    task = rowsql.insert(_task(agent))

    def add(artifact_id: str, data: dict) -> tuple[bool, Artifact]:
        row = Artifact(task=task, artifact_id=artifact_id, data=data)
        return rowsql.append(
            row, within="task", order="position", unique=("task", "artifact_id")
        ), row

    assert add("a", {"n": 1})[0] and add("b", {"n": 2})[0]
    again, _ = add("a", {"n": 3})  # the same artifact id: nothing written
    assert not again
    rows = list(Artifact.objects.filter(task=task).values_list("artifact_id", "position", "data"))
    assert rows == [("a", 0, {"n": 1}), ("b", 1, {"n": 2})]
    other = rowsql.insert(_task(agent))
    first = Artifact(task=other, artifact_id="a", data={})
    assert rowsql.append(first, within="task", order="position", unique=("task", "artifact_id"))
    assert first.position == 0 and first.pk  # positions count per task


@pytest.mark.django_db(transaction=True)
def test_statements_together_are_one_statement_and_one_transaction(make_tenant, make_agent):
    from django.db import IntegrityError
    from django.test.utils import CaptureQueriesContext

    agent = make_agent(make_tenant())
    earlier = rowsql.insert(_task(agent))
    task = _task(agent)
    with CaptureQueriesContext(connection) as queries:
        with rowsql.together():
            rowsql.insert(task)
            event = TaskEvent(task=task, seq=1, kind="task", state="TASK_STATE_SUBMITTED", data={})
            rowsql.insert(event)
            rowsql.execute(
                f"UPDATE {Task._meta.db_table} SET context_id = %s WHERE id = %s",
                ["c2", earlier.pk],
            )
            assert not Task.objects.filter(pk=task.pk).exists()  # held until the block ends
    assert len(queries) == 2  # the read above, then the block's three statements as one
    with connection.cursor() as cursor:  # one transaction wrote the task, its event, the update
        cursor.execute(
            f"SELECT xmin::text FROM {Task._meta.db_table} WHERE id IN (%s, %s) UNION "
            f"SELECT xmin::text FROM {TaskEvent._meta.db_table} WHERE task_id = %s",
            [task.pk, earlier.pk, task.pk],
        )
        assert len(cursor.fetchall()) == 1
    assert Task.objects.get(pk=earlier.pk).context_id == "c2"
    assert TaskEvent.objects.filter(task=task, seq=1).count() == 1
    assert event.pk is None  # results are not read in a block

    # All or nothing: the second INSERT of the same id fails, and the first is not kept.
    again, other = _task(agent), _task(agent)
    with pytest.raises(IntegrityError), rowsql.together():
        rowsql.insert(other)
        rowsql.insert(again)
        rowsql.insert(_task(agent, id=again.pk))
    assert not Task.objects.filter(pk__in=[other.pk, again.pk]).exists()

    # A block that raises before it ends sends nothing; blocks do not nest.
    with pytest.raises(ValueError, match="changed my mind"), rowsql.together():
        rowsql.insert(other)
        raise ValueError("changed my mind")
    assert not Task.objects.filter(pk=other.pk).exists()
    with pytest.raises(RuntimeError, match="do not nest"), rowsql.together():
        with rowsql.together():
            pass
    # What reads its result cannot wait for the block's end.
    with pytest.raises(RuntimeError, match="lock"), rowsql.together():
        rowsql.lock(Task, task.pk)
    with pytest.raises(RuntimeError, match="append"), rowsql.together():
        rowsql.append(event, within="task", order="seq", unique=("task", "seq"))


def test_a_read_together_with_the_statements_sees_the_database_before_them(make_tenant, make_agent):
    from django.test.utils import CaptureQueriesContext

    agent = make_agent(make_tenant())
    rowsql.insert(_task(agent))
    count = (f"SELECT count(*) FROM {Task._meta.db_table} WHERE agent_id = %s", [agent.pk])
    with CaptureQueriesContext(connection) as queries:
        with rowsql.together(read=count) as batch:
            rowsql.insert(_task(agent))
    assert len(queries) == 1  # the statement and the read: one round trip
    assert batch.row == (1,)  # not the row the block wrote
    assert Task.objects.filter(agent=agent).count() == 2
    with rowsql.together(read=count) as batch:  # a read alone
        pass
    assert batch.row == (2,)
