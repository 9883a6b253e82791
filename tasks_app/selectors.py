"""Reads of tasks, always scoped by agent and owner; rows become v1.0 protobuf objects (or, for
GetTask's JSON bindings, their v1.0 JSON) here."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from a2a.types import Artifact as ArtifactProto
from a2a.types import ListTasksRequest, ListTasksResponse, TaskState, TaskStatus
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.task import (
    ListTasksCursor,
    decode_list_tasks_cursor,
    encode_list_tasks_cursor,
    validate_page_size,
)
from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet, Sum
from google.protobuf.json_format import ParseDict
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.timestamp_pb2 import Timestamp

from . import rowsql
from .errors import InvalidParamsError, UnsupportedOperationError, task_not_found
from .models import STATE_CHOICES, Artifact, ExecutorState, Message, Task, TaskCount, TaskEvent

if TYPE_CHECKING:
    from agents.auth import Principal
    from agents.models import Agent


def task_scope(*, agent: Agent, principal: Principal) -> QuerySet[Task]:
    tasks = Task.objects.filter(agent=agent)
    if not principal.is_tenant_admin:
        tasks = tasks.filter(owner=principal.owner)
    return tasks


def task_agent_path(*, task_id: str) -> str | None:
    """`<tenant>/<agent>` of the task with this id, whoever owns it; for routing a call that
    names no agent (the gRPC sidecar). Scoping still happens when the call is served."""
    try:
        pk = uuid.UUID(task_id)
    except ValueError:
        return None
    row = (
        Task.objects.filter(pk=pk, agent__is_active=True, agent__tenant__is_active=True)
        .values_list("agent__tenant__slug", "agent__slug")
        .first()
    )
    return f"{row[0]}/{row[1]}" if row else None


def task_get_row(
    *, agent: Agent, principal: Principal, task_id: str, for_update: bool = False
) -> Task:
    """The caller's task, or TaskNotFound: another owner's task does not exist for them."""
    pk = _task_pk(task_id)
    tasks = task_scope(agent=agent, principal=principal)
    if for_update:
        tasks = tasks.select_for_update()
    task = tasks.filter(pk=pk).first()
    if task is None:
        raise task_not_found(task_id)
    return task


@dataclass(frozen=True)
class TaskOrigin:
    """How the request that created a task spoke (Task.dialect, Task.spelling): its protocol
    version ("0.1", "0.3", "1.0") and its spelling (Caller.spelling); "" where not recorded (tasks
    older than the columns, calls that set none)."""

    dialect: str
    spelling: str


def _origin(task: Task) -> TaskOrigin:
    return TaskOrigin(dialect=task.dialect, spelling=task.spelling)


def task_get(
    *,
    agent: Agent,
    principal: Principal,
    task_id: str,
    history_length: int | None = None,
    as_json: bool = False,
    with_origin: bool = False,
) -> TaskProto | dict[str, Any] | tuple[TaskProto | dict[str, Any], TaskOrigin]:
    """The caller's task as GetTask answers it; on PostgreSQL the row, its history and its
    artifacts come in one statement (`_task_read`), elsewhere in three. `as_json`: the task's
    v1.0 JSON (`task_to_json`) rather than its proto. `with_origin`: (that, its TaskOrigin),
    read from the same row."""
    if history_length is not None and history_length < 0:
        raise InvalidParamsError("'historyLength' must be zero or positive.")
    pk = _task_pk(task_id)
    if connection.vendor == "postgresql":
        owner = None if principal.is_tenant_admin else principal.owner
        task = _task_read(pk, history_length, agent_id=agent.pk, owner=owner)
    else:
        task = task_scope(agent=agent, principal=principal).filter(pk=pk).first()
    if task is None:
        raise task_not_found(task_id)
    if as_json:
        answer: TaskProto | dict[str, Any] = task_to_json(task, history_length=history_length)
    else:
        answer = task_to_proto(task, history_length=history_length)
    return (answer, _origin(task)) if with_origin else answer


def task_origin(*, agent: Agent, principal: Principal, task_id: str) -> TaskOrigin | None:
    """The origin of the caller's task, in one query; None when the caller cannot see a task
    of that id (another owner's, another agent's, none, or an id that is no task id)."""
    try:
        pk = uuid.UUID(task_id)
    except (ValueError, TypeError, AttributeError):
        return None
    row = (
        task_scope(agent=agent, principal=principal)
        .filter(pk=pk)
        .values_list("dialect", "spelling")
        .first()
    )
    return TaskOrigin(dialect=row[0], spelling=row[1]) if row else None


def _task_pk(task_id: str) -> uuid.UUID:
    if not task_id:
        raise InvalidParamsError("The task 'id' is required.")
    try:
        return uuid.UUID(task_id)
    except ValueError:
        raise task_not_found(task_id) from None


# Where `_task_read` puts a task's artifacts and (newest first) history as lists of their
# JSON; task_to_proto reads them when they are there.
HISTORY_JSON = "history_json"
ARTIFACTS_JSON = "artifacts_json"


# The columns `_task_read` selects: what a reply and a run need, in the model's field order
# (the order `Model.from_db` takes values in).
_READ_FIELDS = tuple(
    f.attname
    for f in Task._meta.concrete_fields
    if f.attname
    in {
        "id",
        "agent_id",
        "owner",
        "context_id",
        "state",
        "status_message",
        "status_timestamp",
        "metadata",
        "reply_message_id",
        "dialect",
        "spelling",
        "attempt",  # a run tells its executor
    }
)


@functools.cache
def _task_read_sql(scoped: bool, owned: bool, history: str, message_at: bool = False) -> str:
    """`_task_read`'s statement, written once per shape instead of a queryset built and
    compiled by the ORM on every read (that was most of a GetTask's CPU)."""
    task, message, artifact = (m._meta for m in (Task, Message, Artifact))

    def col(meta: Any, name: str) -> str:
        return connection.ops.quote_name(meta.get_field(name).column)

    def table(meta: Any) -> str:
        return connection.ops.quote_name(meta.db_table)

    columns = ", ".join(f"t.{col(task, name)}" for name in _READ_FIELDS)
    artifacts = (
        f"ARRAY(SELECT a.{col(artifact, 'data')} FROM {table(artifact)} a "
        f"WHERE a.{col(artifact, 'task')} = t.{col(task, 'id')} "
        f"ORDER BY a.{col(artifact, 'position')})"
    )
    history_sql = "NULL"
    if history != "none":
        history_sql = (
            f"ARRAY(SELECT m.{col(message, 'data')} FROM {table(message)} m "
            f"WHERE m.{col(message, 'task')} = t.{col(task, 'id')} "
            f"ORDER BY m.{col(message, 'position')} DESC"
            + (" LIMIT %(history)s)" if history == "limit" else ")")
        )
    message_sql = "NULL"
    if message_at:
        message_sql = (
            f"(SELECT m.{col(message, 'data')} FROM {table(message)} m "
            f"WHERE m.{col(message, 'task')} = t.{col(task, 'id')} "
            f"AND m.{col(message, 'position')} = %(position)s)"
        )
    where = [f"t.{col(task, 'id')} = %(pk)s"]
    if scoped:
        where.append(f"t.{col(task, 'agent')} = %(agent)s")
    if owned:
        where.append(f"t.{col(task, 'owner')} = %(owner)s")
    return (
        f"SELECT {columns}, {artifacts}, {history_sql}, {message_sql} FROM {table(task)} t "
        f"WHERE {' AND '.join(where)}"
    )


def _task_read(
    pk: uuid.UUID,
    history_length: int | None,
    *,
    agent_id: int | None = None,
    owner: str | None = None,
    message_at: int | None = None,
) -> Task | None:
    """PostgreSQL: one task with its artifacts and newest `history_length` messages (as
    ARTIFACTS_JSON and HISTORY_JSON), in one statement (scoped to `agent_id` and `owner` when
    given; with the data of its message at position `message_at` as `task.message_at`);
    None when there is no such task."""
    history = "none" if history_length == 0 else "all" if history_length is None else "limit"
    sql = _task_read_sql(agent_id is not None, owner is not None, history, message_at is not None)
    params = {
        "pk": pk,
        "agent": agent_id,
        "owner": owner,
        "history": history_length,
        "position": message_at,
    }
    with rowsql.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    fields = dict(zip(_READ_FIELDS, row, strict=False))
    for name in ("status_message", "metadata"):  # JSON arrives as text, as Django's backend asks
        fields[name] = _json(fields[name])
    task = Task.from_db(connection.alias, _READ_FIELDS, list(fields.values()))
    artifacts, history_json, message = row[len(_READ_FIELDS) :]
    setattr(task, ARTIFACTS_JSON, [_json(a) for a in artifacts])
    if history != "none":
        setattr(task, HISTORY_JSON, [_json(m) for m in history_json])
    if message_at is not None:
        task.message_at = _json(message)
    return task


def task_for_run(*, task_id: uuid.UUID, position: int) -> tuple[Task, MessageProto, TaskProto]:
    """What a run needs of its task, in one statement: the task (with its agent and tenant,
    from agents.cache), the user's message at `position` that the run answers, and the task as
    the executor first sees it. PostgreSQL only (`_task_read`); elsewhere the ORM's four."""
    from agents.cache import agent_by_pk

    if connection.vendor == "postgresql":
        task = _task_read(task_id, None, message_at=position)
        if task is None:
            raise Task.DoesNotExist(task_id)
        task.agent = agent_by_pk(task.agent_id)
        data = task.message_at
    else:
        task = Task.objects.select_related("agent__tenant").get(pk=task_id)
        data = task.messages.get(position=position).data
    if data is None:
        raise Message.DoesNotExist(f"Task {task_id} has no message at position {position}.")
    return task, ParseDict(data, MessageProto()), task_to_proto(task)


def task_for_cancel(*, task_id: uuid.UUID) -> tuple[Task, TaskProto]:
    """What an executor's cancel() outside a run needs: the task (with its agent and tenant)
    and the task as the executor sees it."""
    task = Task.objects.select_related("agent__tenant").get(pk=task_id)
    return task, task_to_proto(task)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def task_to_proto(
    task: Task, *, history_length: int | None = None, include_artifacts: bool = True
) -> TaskProto:
    proto = TaskProto(id=str(task.id), context_id=task.context_id, status=task_status(task))
    if task.metadata:
        proto.metadata.update(task.metadata)
    if include_artifacts:
        proto.artifacts.extend(ParseDict(a, ArtifactProto()) for a in _artifacts_data(task))
    if history_length != 0:
        history = _history_data(task, history_length)
        proto.history.extend(ParseDict(m, MessageProto()) for m in history)
    return proto


def task_to_json(task: Task, *, history_length: int | None = None) -> dict[str, Any]:
    """`MessageToDict(task_to_proto(task))`, built without the proto: the stored messages and
    artifacts are MessageToDict's output already (services `_dict`), and parsing them into
    protos only to print them back was a fifth of GetTask's CPU in the request."""
    status: dict[str, Any] = {"state": task.state}
    if task.status_message:
        status["message"] = task.status_message
    status["timestamp"] = _timestamp(task.status_timestamp).ToJsonString()
    data: dict[str, Any] = {"id": str(task.id)}
    if task.context_id:
        data["contextId"] = task.context_id
    data["status"] = status
    if artifacts := list(_artifacts_data(task)):
        data["artifacts"] = artifacts
    if history_length != 0 and (history := _history_data(task, history_length)):
        data["history"] = history
    if task.metadata:
        data["metadata"] = task.metadata
    return data


def _artifacts_data(task: Task) -> Iterable[dict[str, Any]]:
    """A task's artifacts' stored JSON: what `_task_read` read, or was prefetched, or a query."""
    read = vars(task)
    if ARTIFACTS_JSON in read:
        return read[ARTIFACTS_JSON] or []
    prefetched = getattr(task, "_prefetched_objects_cache", {})
    if "artifacts" in prefetched:
        return [a.data for a in prefetched["artifacts"]]
    return task.artifacts.values_list("data", flat=True)


def _history_data(task: Task, history_length: int | None) -> list[dict[str, Any]]:
    """A task's last `history_length` messages' stored JSON (all if None), oldest first."""
    read = vars(task)
    if HISTORY_JSON in read:  # newest first, already cut to history_length
        return (read[HISTORY_JSON] or [])[::-1]
    prefetched = getattr(task, "_prefetched_objects_cache", {})
    if "messages" in prefetched:  # a page of tasks: fetched in one query, cut here
        messages = [m.data for m in prefetched["messages"]]
        return messages[-history_length:] if history_length else messages
    newest = task.messages.order_by("-position").values_list("data", flat=True)
    return list(newest[:history_length] if history_length else newest)[::-1]


def task_status(task: Task) -> TaskStatus:
    status = TaskStatus(
        state=TaskState.Value(task.state), timestamp=_timestamp(task.status_timestamp)
    )
    if task.status_message:
        status.message.CopyFrom(ParseDict(task.status_message, MessageProto()))
    return status


def task_reply_message(task: Task) -> MessageProto | None:
    """The agent Message that answered the request directly, if the agent chose to."""
    if not task.reply_message_id:
        return None
    data = (
        task.messages.filter(message_id=task.reply_message_id, role="ROLE_AGENT")
        .values_list("data", flat=True)
        .last()
    )
    return ParseDict(data, MessageProto()) if data is not None else None


def task_send_result(*, task_id: uuid.UUID, history_length: int | None) -> TaskProto | MessageProto:
    """What a send answers: the agent's direct Message if it gave one, else the task."""
    if connection.vendor == "postgresql":
        task = _task_read(task_id, history_length)
        if task is None:
            raise Task.DoesNotExist(task_id)
    else:
        task = Task.objects.get(pk=task_id)
    return task_reply_message(task) or task_to_proto(task, history_length=history_length)


def task_list(
    *,
    agent: Agent,
    principal: Principal,
    request: ListTasksRequest,
    size_of: Callable[[TaskProto], int] | None = None,
) -> ListTasksResponse:
    """A page of the caller's tasks, bounded by `pageSize` and by LIST_PAGE_MAX_BYTES of the
    tasks' encoding: their v1.0 protobuf, or `size_of(task)` where a binding answers in
    another encoding."""
    if not principal.can_list:
        raise UnsupportedOperationError(
            "Listing tasks needs an API key on this agent: anonymous callers are isolated and "
            "reach a task only by its id."
        )
    page_size = request.page_size if request.HasField("page_size") else DEFAULT_LIST_TASKS_PAGE_SIZE
    try:
        validate_page_size(page_size)
    except InvalidParamsError as exc:  # the SDK's check, with the parameter named
        raise InvalidParamsError(
            f"'pageSize' {page_size} is out of range: {exc.message} (it must be between 1 and "
            f"{MAX_LIST_TASKS_PAGE_SIZE} inclusive; without it a page holds at most "
            f"{DEFAULT_LIST_TASKS_PAGE_SIZE} tasks)."
        ) from None
    history_length = request.history_length if request.HasField("history_length") else None
    if history_length is not None and history_length < 0:
        raise InvalidParamsError("'historyLength' must be zero or positive.")

    tasks = task_scope(agent=agent, principal=principal)
    if request.context_id:
        tasks = tasks.filter(context_id=request.context_id)
    if request.status not in TaskState.values():  # protobuf enums accept any number
        raise InvalidParamsError(f"'status' {request.status} is not a task state.")
    state = None
    if request.status != TaskState.TASK_STATE_UNSPECIFIED:
        state = TaskState.Name(request.status)
        tasks = tasks.filter(state=state)
    after = None
    if request.HasField("status_timestamp_after"):
        try:  # binary protobuf (gRPC) does not range-check a Timestamp as JSON parsing does
            after = request.status_timestamp_after.ToDatetime(UTC)
        except (ValueError, OverflowError, OSError):
            raise InvalidParamsError("'statusTimestampAfter' is not a valid timestamp.") from None
    total = _total_size(
        agent=agent,
        principal=principal,
        matching=tasks,
        state=state,
        context_id=request.context_id,
        after=after,
    )
    if after is not None:
        tasks = tasks.filter(status_timestamp__gt=after)

    if request.page_token:
        tasks = task_page_after(tasks=tasks, page_token=request.page_token)
    include_artifacts = (
        request.include_artifacts if request.HasField("include_artifacts") else False
    )
    page_query = tasks.order_by("-status_timestamp", "-id")
    if history_length != 0:
        page_query = page_query.prefetch_related("messages")  # Meta.ordering: by position
    if include_artifacts:
        page_query = page_query.prefetch_related("artifacts")
    rows = list(page_query[: page_size + 1])
    more = len(rows) > page_size
    rows = rows[:page_size]
    page = page_within_budget(
        (
            task_to_proto(t, history_length=history_length, include_artifacts=include_artifacts)
            for t in rows
        ),
        shrink=_history_within,
        size_of=size_of,
    )
    next_token = ""
    if more or len(page) < len(rows):  # the budget may end a page before pageSize does
        next_token = task_page_token(task=rows[len(page) - 1])
    return ListTasksResponse(
        tasks=page, next_page_token=next_token, page_size=page_size, total_size=total
    )


# The most a page of any list (ListTasks, tasks/list, ListTask, the push config lists) holds,
# in protobuf bytes (v1.0's, or the binding's where it passes `size_of`): half of gRPC's default
# 4 MiB receive limit, the limit of every gRPC client that sets none. The other half is
# headroom for the answer's own fields and for estimates (a push config's v0.3 form, the
# history cut). A page ends before `pageSize` when its next item would pass the budget; its
# next page token goes on from there (the specification: "The service may return fewer than
# this value").
LIST_PAGE_MAX_BYTES = 2 * 1024 * 1024

P = TypeVar("P", bound=ProtoMessage)


def _encoded_size(item: Any, size_of: Callable[[Any], int] | None = None) -> int:
    """An item's bytes as one element of a repeated field: its tag, its length, itself (its
    v1.0 protobuf, or as `size_of` measures it)."""
    size = item.ByteSize() if size_of is None else size_of(item)
    return 1 + max(1, (size.bit_length() + 6) // 7) + size


def page_within_budget(
    items: Iterable[P],
    *,
    shrink: Callable[[P, int], P] | None = None,
    budget: int = LIST_PAGE_MAX_BYTES,
    size_of: Callable[[P], int] | None = None,
) -> list[P]:
    """The leading `items` (read only as far as needed) whose encoding fits in `budget`.

    The first item is always kept, so that paging goes on: one that alone passes the budget
    is first given to `shrink`, with the bytes it is over by, to make it smaller where it can."""
    kept: list[P] = []
    used = 0
    for item in items:
        size = _encoded_size(item, size_of)
        if kept and used + size > budget:
            break
        if not kept and size > budget and shrink is not None:
            item = shrink(item, size - budget)
            size = _encoded_size(item, size_of)
        kept.append(item)
        used += size
    return kept


def _history_within(task: TaskProto, excess: int) -> TaskProto:
    """A task that alone passes a page's budget by `excess` bytes, without its oldest history
    messages until it fits: the specification lets a server return fewer messages than
    `historyLength` asks ("MAY apply a lower limit"), newest kept, as historyLength keeps them.
    Messages are counted in v1.0 bytes, near enough for another dialect's encoding: the
    budget's margin holds the difference. What is left when no history is (its status
    message, asked-for artifacts) goes out as it is, as GetTask would answer it: then it is its
    page's only task."""
    dropped = 0
    for message in task.history:
        if excess <= 0:
            break
        excess -= _encoded_size(message)
        dropped += 1
    del task.history[:dropped]
    return task


# With statusTimestampAfter, totalSize counts whichever side of the timestamp holds at most this
# many tasks; when both sides hold more, the tasks after it are counted in full.
TOTAL_SIZE_COUNT_LIMIT = 10_000


def _total_size(
    *,
    agent: Agent,
    principal: Principal,
    matching: QuerySet[Task],
    state: str | None,
    context_id: str,
    after: datetime | None,
) -> int:
    """ListTasks' totalSize: how many tasks the filters match, exactly, without reading them
    where the task counts can say (docs/decisions.md, "Listing tasks at scale"). `matching`
    has every filter but the timestamp."""
    if context_id:
        # A context is one conversation: counted through its index, as long as it is.
        newer = matching if after is None else matching.filter(status_timestamp__gt=after)
        return newer.count()
    counts = TaskCount.objects.filter(agent=agent)
    if not principal.is_tenant_admin:
        counts = counts.filter(owner=principal.owner)
    if state is not None:
        counts = counts.filter(state=state)
    if after is None:
        return int(counts.aggregate(n=Sum("n"))["n"] or 0)
    limit = TOTAL_SIZE_COUNT_LIMIT
    newer = matching.filter(status_timestamp__gt=after).order_by()
    newer_count = newer[: limit + 1].count()
    if newer_count <= limit:
        return newer_count
    # Many changed since `after`: count those that did not and subtract them from the counts,
    # in one statement, so the counts and the tasks are read in one snapshot.
    older = matching.filter(status_timestamp__lte=after).order_by().values("pk")[: limit + 1]
    counts_sql, counts_params = counts.values("n").query.sql_with_params()
    older_sql, older_params = older.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT COALESCE(SUM(n), 0) FROM ({counts_sql}) c), "
            f"(SELECT COUNT(*) FROM ({older_sql}) o)",
            [*counts_params, *older_params],
        )
        everything, older_count = cursor.fetchone()
    if older_count <= limit:
        return int(everything) - older_count
    return newer.count()


def task_artifact_ids(*, task_id: str) -> list[str]:
    """The task's artifact ids in order (callers have already checked access to the task)."""
    return list(
        Artifact.objects.filter(task_id=task_id)
        .order_by("position")
        .values_list("artifact_id", flat=True)
    )


@functools.cache
def _events_after_sql(with_data: bool) -> str:
    """The event-log reads of streams and waiters, written once (PostgreSQL)."""
    meta = TaskEvent._meta
    q = connection.ops.quote_name
    columns = ["seq", "kind", "state", "data"] if with_data else ["seq", "kind", "state"]
    seq = q(meta.get_field("seq").column)
    return (
        f"SELECT {', '.join(q(meta.get_field(c).column) for c in columns)} FROM {q(meta.db_table)} "
        f"WHERE {q(meta.get_field('task').column)} = %s AND {seq} > %s ORDER BY {seq}"
        + (" LIMIT %s" if with_data else "")
    )


def task_events_after(
    *, task_id: uuid.UUID, after_seq: int, limit: int = 100
) -> list[tuple[int, str, str, dict[str, Any]]]:
    """(seq, kind, state, StreamResponse JSON) of the task's events after `after_seq`, in order."""
    if connection.vendor == "postgresql":
        with rowsql.cursor() as cursor:
            cursor.execute(_events_after_sql(True), [task_id, after_seq, limit])
            return [(seq, kind, state, _json(data)) for seq, kind, state, data in cursor]
    return list(
        TaskEvent.objects.filter(task_id=task_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("seq", "kind", "state", "data")[:limit]
    )


def task_event_states_after(*, task_id: uuid.UUID, after_seq: int) -> list[tuple[int, str, str]]:
    """(seq, kind, state) of the task's events after `after_seq`, in order."""
    if connection.vendor == "postgresql":
        with rowsql.cursor() as cursor:
            cursor.execute(_events_after_sql(False), [task_id, after_seq])
            return cursor.fetchall()
    return list(
        TaskEvent.objects.filter(task_id=task_id, seq__gt=after_seq)
        .order_by("seq")
        .values_list("seq", "kind", "state")
    )


def task_snapshot(
    *, task_id: uuid.UUID, history_length: int | None = None
) -> tuple[int, TaskProto]:
    """The task and the seq of the last event it reflects, read under the task's row lock so
    no event slips in between (event writers take the same lock)."""
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task_id)
        return task.last_seq, task_to_proto(task, history_length=history_length)


def _timestamp(value: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(value)
    return ts


def _ns(value: datetime) -> int:
    return int(value.timestamp()) * 1_000_000_000 + value.microsecond * 1000


def _datetime_from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC).replace(
        microsecond=(ns % 1_000_000_000) // 1000
    )


def _uuid(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidParamsError("'pageToken' is malformed; start again without it.") from None


# --- what a run reads beside its task (agents.executors.platform.PlatformRun) ------------------


def executor_state(*, task_id: uuid.UUID) -> dict[str, Any]:
    """What the task's executor kept (services.executor_state_save); {} when nothing."""
    data = ExecutorState.objects.filter(task_id=task_id).values_list("data", flat=True).first()
    return data or {}


def _earlier_in_context(task_id: uuid.UUID) -> QuerySet[Task]:
    """The tasks of the same conversation before this one: the same agent, owner and context,
    created earlier (one owner's conversation never reaches another's)."""
    task = Task.objects.only("agent_id", "owner", "context_id", "created_at").get(pk=task_id)
    return Task.objects.filter(
        agent_id=task.agent_id,
        owner=task.owner,
        context_id=task.context_id,
        created_at__lt=task.created_at,
    )


def context_executor_state(*, task_id: uuid.UUID) -> dict[str, Any]:
    """The state the executor kept for the latest earlier task of the conversation; {}."""
    data = (
        ExecutorState.objects.filter(task__in=_earlier_in_context(task_id))
        .order_by("-task__created_at")
        .values_list("data", flat=True)
        .first()
    )
    return data or {}


def context_messages_before(*, task_id: uuid.UUID, limit: int) -> list[MessageProto]:
    """The last `limit` messages of the conversation's earlier tasks, oldest first: each task's
    history, then its final status message (an agent's answer that no later status moved into
    the history)."""
    if limit <= 0:
        return []
    earlier = list(
        _earlier_in_context(task_id)
        .order_by("-created_at", "-id")
        .values_list("id", "status_message")[:limit]
    )
    if not earlier:
        return []
    histories: dict[uuid.UUID, list[dict[str, Any]]] = {pk: [] for pk, _ in earlier}
    for pk, data in (
        Message.objects.filter(task_id__in=histories)
        .order_by("task_id", "position")
        .values_list("task_id", "data")
    ):
        histories[pk].append(data)
    messages: list[dict[str, Any]] = []
    for pk, status_message in reversed(earlier):  # oldest task first
        messages.extend(histories[pk])
        ids = {m.get("messageId") for m in histories[pk]}
        if status_message and status_message.get("messageId") not in ids:
            messages.append(status_message)
    return [ParseDict(m, MessageProto(), ignore_unknown_fields=True) for m in messages[-limit:]]


# --- ListTasks' page token: task_list's, and the console's, whose task pages page the same way --


def task_page_token(*, task: Task) -> str:
    """The page token of the page after `task` in (-status_timestamp, -id) order: ListTasks'
    own token (a2a-sdk's cursor), so every list of tasks pages one way."""
    return encode_list_tasks_cursor(
        ListTasksCursor(timestamp_ns=_ns(task.status_timestamp), task_id=str(task.id))
    )


def task_page_after(*, tasks: QuerySet[Task], page_token: str) -> QuerySet[Task]:
    """`tasks` after the one `page_token` names, in (-status_timestamp, -id) order, as
    ListTasks reads them; InvalidParamsError for a token this server did not issue."""
    try:
        # The SDK's decoder reads JSON, which a forged token may nest past the recursion limit.
        cursor = decode_list_tasks_cursor(page_token)
    except RecursionError:
        cursor = None
    try:
        edge = _datetime_from_ns(cursor.timestamp_ns)  # type: ignore[union-attr,arg-type]
    except (AttributeError, TypeError, ValueError, OverflowError, OSError):
        raise InvalidParamsError(
            "'pageToken' is not a token this server issued; start again without it."
        ) from None
    # The bound on the timestamp alone is where the index range starts; the OR only sorts out
    # the ties, so a page deep in the list costs what the first one does.
    return tasks.filter(
        Q(status_timestamp__lt=edge) | Q(id__lt=_uuid(cursor.task_id)),
        status_timestamp__lte=edge,
    )


# --- what /metrics scrapes (a2a_platform.metrics) ----------------------------------------------


def task_counts_by_agent() -> dict[tuple[str, str], dict[str, int]]:
    """(tenant slug, agent slug) -> state -> tasks, for every agent that has tasks: each of
    its states, 0 included, in STATE_CHOICES order (a series that vanished when an agent's last
    task moved on would read as "no data" rather than "none")."""
    rows = (
        Task.objects.values_list("tenant__slug", "agent__slug", "state")
        .annotate(n=Count("pk"))
        .order_by()
    )
    found: dict[tuple[str, str], dict[str, int]] = {}
    for tenant, agent, state, n in rows:
        found.setdefault((tenant, agent), {})[state] = n
    return {
        key: {state: counts.get(state, 0) for state, _ in STATE_CHOICES}
        for key, counts in sorted(found.items())
    }
