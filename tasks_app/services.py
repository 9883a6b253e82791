"""Writes of the A2A task lifecycle. Each service validates, owns its transaction, and
queues follow-up work with `transaction.on_commit`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import uuid
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NamedTuple

from a2a.server.events import Event
from a2a.types import Artifact as ArtifactProto
from a2a.types import Message as MessageProto
from a2a.types import (
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.types import Task as TaskProto
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.message import Message as ProtoMessage

from . import lanes, rowsql
from .artifacts import artifact_parts_append
from .doorbell import ring as _ring
from .doorbell import ring_runner
from .errors import (
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from .models import (
    INTERRUPTED_STATES,
    MAX_ID_LENGTH,
    TASK_COUNT_SHARDS,
    TERMINAL_STATES,
    Artifact,
    ExecutorState,
    Message,
    SentMessage,
    Task,
    TaskCount,
    TaskEvent,
)
from .push_seam import push_seam
from .selectors import ARTIFACTS_JSON, HISTORY_JSON, task_get_row, task_status, task_to_proto

if TYPE_CHECKING:
    from agents.auth import Principal
    from agents.models import Agent

logger = logging.getLogger(__name__)

SUBMITTED = TaskState.Name(TaskState.TASK_STATE_SUBMITTED)


@dataclass(frozen=True)
class SendOutcome:
    task_id: uuid.UUID
    # The event sequence at the moment of sending: waiters look for progress past it.
    since_seq: int
    # Whether the send made the task; its event at `since_seq` is then the task as created.
    created: bool = False
    # The task as this send committed it, when the send made it (what a non-blocking send
    # answers, without reading it again).
    task: TaskProto | None = None
    # The message repeated one sent before (by its messageId): nothing was written, and the
    # outcome is the first send's.
    repeated: bool = False


def _dict(message: Any) -> dict[str, Any]:
    return MessageToDict(message)


def message_send(
    *,
    agent: Agent,
    principal: Principal,
    request: SendMessageRequest,
    new_task_id: uuid.UUID | None = None,
    extensions: list[str] | None = None,
    push_dialect: str = "1.0",
    push_headers: dict[str, str] | None = None,
    dialect: str = "",
    spelling: str = "",
) -> SendOutcome:
    """Create a task or continue one with the user's message, then queue the agent run.

    `new_task_id` is the id of the task to create (v0.1 clients choose their task ids).
    `dialect` and `spelling`: how the request spoke (its version, Caller.spelling); a
    task it creates keeps them (Task.dialect, Task.spelling), in the same INSERT.
    """
    message = request.message
    _message_validate(agent=agent, request=request)
    # What the send asks, for a repeat of its messageId to be compared with (on the conflict
    # path only); None when the agent remembers no messageIds: nothing written, nothing read.
    fingerprint = send_fingerprint(request) if _deduplicates(agent) else None
    # Inside a caller's transaction, a savepoint: a repeated id's failed INSERT must not abort
    # the caller's work. Outside one (the bindings), the send is its own transaction anyway.
    unit = transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext()
    try:
        with unit:
            return _message_send(
                agent=agent,
                principal=principal,
                request=request,
                new_task_id=new_task_id,
                extensions=extensions,
                push_dialect=push_dialect,
                push_headers=push_headers,
                dialect=dialect,
                spelling=spelling,
                fingerprint=fingerprint,
            )
    except IntegrityError:
        # A repeated messageId: its row met the first send's (or that of a retry racing it,
        # which committed first). Any other integrity error is not ours to answer.
        if fingerprint is None:
            raise
        repeated = _sent_before(
            agent=agent,
            principal=principal,
            message_id=message.message_id,
            fingerprint=fingerprint,
        )
        if repeated is None:
            raise
        return repeated


def _deduplicates(agent: Agent) -> bool:
    """Whether the agent's sends are remembered by messageId: the platform's retention, and the
    agent's own switch (off for clients that reuse ids for new messages, such as the TCK)."""
    return bool(settings.A2A_MESSAGE_ID_RETENTION_SECONDS) and agent.deduplicate_messages


def send_fingerprint(request: SendMessageRequest) -> str:
    """What a send asks, as a SHA-256 digest (64 hex digits): its message (parts, metadata,
    extensions, reference task ids, role, taskId, contextId), its configuration and its
    metadata. A repeat of a messageId is the same send only with the same digest.

    It digests the request's deterministic serialization, without the `tenant` that only
    routes it, and without the empty sub-messages that one dialect writes and another leaves
    out (v0.3's `configuration: {}`, v1.0's `metadata: {}`): each dialect's codec converts to
    the same v1.0 request, and requests that mean the same in any of them have one digest."""
    canonical = SendMessageRequest()
    canonical.CopyFrom(request)
    canonical.ClearField("tenant")
    _empty_cleared(canonical)
    return hashlib.sha256(canonical.SerializeToString(deterministic=True)).hexdigest()


def _empty_cleared(message: ProtoMessage) -> None:
    """Clear the message's empty sub-messages at any depth, as if they had not been sent. Not
    those of a oneof (a Part whose `data` is an empty object chose `data`), and nothing inside
    the well-known types (Struct, Value), where an empty value is a value."""
    for field, value in message.ListFields():
        walk, clear = _clearing(field)
        if field.is_repeated:
            if walk:
                for item in value:
                    _empty_cleared(item)
            continue
        if walk:
            _empty_cleared(value)
        if clear and value.ByteSize() == 0:
            message.ClearField(field.name)


@functools.cache
def _clearing(field: FieldDescriptor) -> tuple[bool, bool]:
    """Whether `_empty_cleared` looks inside the field's values, and whether it clears the
    field when empty: decided once per field (reading its descriptor is most of the cost)."""
    kind = field.message_type
    if kind is None or kind.GetOptions().map_entry:
        return False, False
    walk = not kind.full_name.startswith("google.protobuf.")
    return walk, not field.is_repeated and field.containing_oneof is None


def _sent_before(
    *, agent: Agent, principal: Principal, message_id: str, fingerprint: str
) -> SendOutcome | None:
    """What the first send of `message_id` by this caller to this agent made, while its id is
    remembered (`A2A_MESSAGE_ID_RETENTION_SECONDS`), if this send asks what it asked; refused
    if it asks something else. A first send recorded without a fingerprint (by a process of
    an earlier version) matches any."""
    sent = (
        SentMessage.objects.filter(agent=agent, owner=principal.owner, message_id=message_id)
        .values_list("task_id", "since_seq", "created_task", "fingerprint")
        .first()
    )
    if sent is None:
        return None
    task_pk, since_seq, created, first_fingerprint = sent
    if first_fingerprint and first_fingerprint != fingerprint:
        raise InvalidParamsError(
            f"messageId {message_id!r} was already sent to this agent with another message "
            f"(it {'made' if created else 'continued'} task {task_pk}); send a new messageId "
            "for a new message, or the same message to get that task again."
        )
    return SendOutcome(task_id=task_pk, since_seq=since_seq, created=created, repeated=True)


def _sent_record(
    task: Task,
    owner: str,
    message_id: str,
    fingerprint: str | None,
    *,
    since_seq: int,
    created: bool,
) -> None:
    """Remember the message's id and fingerprint for the task (in the send's transaction): a
    second send of it fails here, on the unique key, and gets what this one made, or is
    refused if it asks something else (`_sent_before`). Nothing when `fingerprint` is None
    (the agent remembers no messageIds)."""
    if fingerprint is not None:
        sent = SentMessage(
            agent_id=task.agent_id,
            owner=owner,
            message_id=message_id,
            fingerprint=fingerprint,
            task_id=task.pk,
            since_seq=since_seq,
            created_task=created,
            created_at=timezone.now(),
        )
        rowsql.insert(sent)


def _message_send(
    *,
    agent: Agent,
    principal: Principal,
    request: SendMessageRequest,
    new_task_id: uuid.UUID | None,
    extensions: list[str] | None,
    push_dialect: str,
    push_headers: dict[str, str] | None,
    dialect: str,
    spelling: str,
    fingerprint: str | None,
) -> SendOutcome:
    message = request.message
    inline_push = request.configuration.HasField("task_push_notification_config")
    lane = lanes.Lane.of(agent, principal.key_limits)
    if lane.checked:  # a quota or cap: refused before anything is written
        lanes.send_admit(lane, new_task=not message.task_id)
    # A tenant with a cap on runs at once: its runs start only through its lane, whose
    # hand-over counts them under the tenant's lock (lanes.promote, after the commit).
    via_lane = lane.exact
    # The window is a share: counted only while other tenants send too (lanes.Contention).
    shared = lanes.CONTENTION.sent(agent.tenant_id) and bool(lane.window)
    # A new task with nothing to look up (no id the client chose, no push config to store) is
    # written in one round trip, which also counts the tenant's window (tasks_app.lanes);
    # anything else in a transaction that reads as it goes.
    if message.task_id or new_task_id is not None or inline_push:
        unit: Any = transaction.atomic()
        held: bool | None = None
    else:
        window = shared and not via_lane
        unit = rowsql.together(read=lanes.in_flight_read(lane) if window else None)
        held = via_lane
    with unit as batch:
        if held is None:
            held = via_lane or (shared and lanes.window_full(lane))
        if message.task_id:
            task = task_get_row(
                agent=agent, principal=principal, task_id=message.task_id, for_update=True
            )
            # First: a repeat of the follow-up that set the task going again is not an error.
            _sent_record(
                task,
                principal.owner,
                message.message_id,
                fingerprint,
                since_seq=task.last_seq,
                created=False,
            )
            if task.is_terminal:
                raise UnsupportedOperationError(
                    f"Task {message.task_id} is {task.state} and accepts no more messages; "
                    "send without taskId to start a new task."
                )
            if task.state not in INTERRUPTED_STATES:
                raise UnsupportedOperationError(
                    f"Task {message.task_id} is {task.state}: the agent is still on it. Send "
                    "a follow-up once it asks for one (input-required or auth-required), or "
                    "cancel it."
                )
            if task.job_id:
                raise UnsupportedOperationError(
                    f"Task {message.task_id} already has a message waiting for the agent; "
                    "wait for its answer before sending another."
                )
            if message.context_id and message.context_id != task.context_id:
                raise InvalidParamsError(
                    f"message.contextId {message.context_id!r} does not match the task's "
                    f"contextId {task.context_id!r}."
                )
        else:
            task = Task(
                id=new_task_id or uuid.uuid4(),
                tenant_id=agent.tenant_id,
                agent=agent,
                context_id=message.context_id or str(uuid.uuid4()),
                owner=principal.owner,
                state=SUBMITTED,
                status_timestamp=timezone.now(),
                metadata=_dict(request.metadata) if request.HasField("metadata") else {},
                dialect=dialect,
                spelling=spelling,
            )
        stored = MessageProto()
        stored.CopyFrom(message)
        stored.task_id = str(task.id)
        stored.context_id = task.context_id
        task.job_id = str(uuid.uuid4())
        task.job_queued_at = timezone.now()
        task.held = held
        created = None
        if message.task_id:
            _push_config_inline(task, request, push_dialect, push_headers)
            _status_message_to_history(task)
            position = _history_append(task, stored)
            task.job_args = _job_args(request, position, extensions)
            task.attempt = 1  # a new turn
            task.save()
        else:
            # A new task is written whole, knowing what it holds, without reading it back:
            # the task (its creation event's seq already counted), its count, the message, and
            # the event; no reader can know of it before the commit, so its event rings no one.
            task.job_args = _job_args(request, 0, extensions)
            task.last_seq = 1
            _sent_record(
                task, principal.owner, message.message_id, fingerprint, since_seq=1, created=True
            )
            _task_insert(task, chosen_id=new_task_id is not None)
            _task_counts_move(task, None, SUBMITTED)
            pushes = _push_config_inline(task, request, push_dialect, push_headers)
            _history_append(task, stored, position=0)
            setattr(task, HISTORY_JSON, [_dict(stored)])
            setattr(task, ARTIFACTS_JSON, [])
            created = task_to_proto(task)
            _event_insert(
                task, 1, TaskEvent.Kind.TASK, StreamResponse(task=created), push=pushes, ring=False
            )
        since_seq = task.last_seq
        job_id, task_pk, job_args = task.job_id, task.pk, task.job_args
    # After the block, which has committed (or, inside a caller's transaction, once that does).
    # robust: the message is stored either way; if the broker is down, the reaper queues the
    # run later, and the client must not be told (by an error) to send it again.
    if batch is not None and batch.row is not None and batch.row[0] >= lane.window:
        lanes.hold(task_pk, job_id)  # the window was full: it goes to the lane after all
        held = True
    if via_lane:
        transaction.on_commit(lambda: _lane_hand_over(agent.tenant_id, agent), robust=True)
    elif not held:  # else its tenant's lane hands it over as its runs end (tasks_app.lanes)
        transaction.on_commit(lambda: enqueue_run(task_pk, job_id, job_args), robust=True)
    return SendOutcome(
        task_id=task_pk, since_seq=since_seq, created=not message.task_id, task=created
    )


def _task_insert(task: Task, *, chosen_id: bool) -> None:
    """INSERT a new task. An id the client chose (v0.1 clients choose their task ids) may be
    taken: whose it is, or that it is a task at all, is not theirs to learn. A savepoint turns
    a concurrent creation of the same id into the same answer; ids made here are fresh UUIDs."""
    if not chosen_id:
        rowsql.insert(task)
        return
    taken = InvalidParamsError(
        f"Task id {task.pk} cannot be used for a new task; choose a fresh UUID."
    )
    if Task.objects.filter(pk=task.pk).exists():
        raise taken
    try:
        with transaction.atomic():
            rowsql.insert(task)
    except IntegrityError:
        raise taken from None


def _push_config_inline(
    task: Task, request: SendMessageRequest, dialect: str, headers: dict[str, str] | None
) -> bool:
    """Store the send's inline push config, if it has one; whether it had."""
    if not request.configuration.HasField("task_push_notification_config"):
        return False
    config = request.configuration.task_push_notification_config
    push_seam().config_set(task=task, config=config, dialect=dialect, checked=True, headers=headers)
    return True


def _job_args(
    request: SendMessageRequest, position: int, extensions: list[str] | None
) -> dict[str, Any]:
    return {
        "position": position,
        "configuration": _job_configuration(request),
        "extensions": extensions or [],
    }


def _job_configuration(request: SendMessageRequest) -> dict[str, Any]:
    """The send configuration the executor sees. An inline push config is left out: it is
    stored encrypted with the push configs, and its token and credentials must not sit in plain
    text in the job's row, the broker, or a failed job's record."""
    if not request.HasField("configuration"):
        return {}
    configuration = type(request.configuration)()
    configuration.CopyFrom(request.configuration)
    configuration.ClearField("task_push_notification_config")
    return _dict(configuration)


_REPR_LIMIT = 1024  # as Celery's own argsrepr and kwargsrepr


def enqueue_run(task_pk: uuid.UUID, job_id: str, job_args: dict[str, Any]) -> None:
    """Hand a run's job to the broker (the run's task already says it waits for `job_id`)."""
    from .tasks import run_agent_task

    args = [str(task_pk), job_args["position"]]
    kwargs = {
        "configuration": job_args["configuration"],
        "extensions": job_args.get("extensions", []),
    }
    # The reprs Celery shows (inspect, the console's workers page), made here: Celery's own
    # saferepr walks the arguments in Python, a twelfth of a send's publish.
    run_agent_task.apply_async(
        args=args,
        kwargs=kwargs,
        task_id=job_id,
        argsrepr=repr(args)[:_REPR_LIMIT],
        kwargsrepr=repr(kwargs)[:_REPR_LIMIT],
    )


def _message_validate(*, agent: Agent, request: SendMessageRequest) -> None:
    message = request.message
    if not request.HasField("message"):
        raise InvalidParamsError("'message' is required.")
    if not message.message_id:
        raise InvalidParamsError("message.messageId is required.")
    for name, value in (("messageId", message.message_id), ("contextId", message.context_id)):
        if len(value) > MAX_ID_LENGTH:
            raise InvalidParamsError(f"message.{name} is longer than {MAX_ID_LENGTH} characters.")
    if message.role not in (Role.ROLE_USER, Role.ROLE_UNSPECIFIED):
        raise InvalidParamsError("message.role must be ROLE_USER: clients send user messages.")
    if not message.parts:
        raise InvalidParamsError("message.parts must hold at least one part.")
    for index, part in enumerate(message.parts):
        if part.WhichOneof("content") is None:
            raise InvalidParamsError(
                f"message.parts[{index}] has no content: set one of text, raw, url or data."
            )
    accepted_inputs = agent.default_input_modes or ["text/plain"]
    for index, part in enumerate(message.parts):
        if part.media_type and not _media_type_matches(part.media_type, accepted_inputs):
            raise ContentTypeNotSupportedError(
                f"message.parts[{index}] has media type {part.media_type!r}; this agent "
                f"accepts {', '.join(accepted_inputs)}."
            )
    if request.HasField("configuration"):
        configuration = request.configuration
        if configuration.HasField("history_length") and configuration.history_length < 0:
            raise InvalidParamsError("configuration.historyLength must be zero or positive.")
        wanted = list(configuration.accepted_output_modes)
        offered = agent.default_output_modes or ["text/plain"]
        if wanted and not any(_media_type_matches(w, offered) for w in wanted):
            raise ContentTypeNotSupportedError(
                f"configuration.acceptedOutputModes {wanted} has nothing this agent produces "
                f"({', '.join(offered)})."
            )
        if configuration.HasField("task_push_notification_config"):
            if not agent.push_notifications:
                raise PushNotificationNotSupportedError(
                    "configuration.taskPushNotificationConfig: this agent does not offer push "
                    "notifications (its card declares capabilities.pushNotifications=false)."
                )
            # Checked before the transaction: resolving the host must not hold the task's lock.
            push_seam().url_validate(configuration.task_push_notification_config.url)


def _media_type_matches(media_type: str, accepted: list[str]) -> bool:
    kind = media_type.split(";")[0].strip().lower()
    for candidate in accepted:
        candidate = candidate.lower()
        if candidate in ("*/*", kind) or (
            candidate.endswith("/*") and kind.startswith(candidate[:-1])
        ):
            return True
    return False


def _history_append(task: Task, message: MessageProto, *, position: int | None = None) -> int:
    """Append to the task's history; `position` when the caller knows it (a new task: 0)."""
    if position is None:
        last = task.messages.order_by("-position").values_list("position", flat=True).first()
        position = 0 if last is None else last + 1
    rowsql.insert(
        Message(
            task=task,
            position=position,
            message_id=message.message_id,
            role=Role.Name(message.role or Role.ROLE_USER),
            data=_dict(message),
        )
    )
    return position


def _event_append(task: Task, kind: str, response: StreamResponse, *, ring: bool = True) -> int:
    task.last_seq += 1
    _event_insert(task, task.last_seq, kind, response, push=task.has_push_configs, ring=ring)
    return task.last_seq


def _event_insert(
    task: Task, seq: int, kind: str, response: StreamResponse, *, push: bool, ring: bool = True
) -> None:
    """Store event `seq`, its push deliveries (in its transaction; `push`: the task may have
    push configs, so look for them) and, after the commit, ring its doorbell (`ring`)."""
    event = TaskEvent(task=task, seq=seq, kind=kind, state=task.state, data=_dict(response))
    held = _held_writes.get()
    if held is not None and not push:  # a push delivery needs the event's id: written now
        held.events.append(event)
    else:
        rowsql.insert(event)
    if push:
        push_seam().outbox_add(task=task, event=event)
    if ring:
        task_pk, state = task.pk, task.state
        transaction.on_commit(lambda: _ring(task_pk, seq, kind, state))


# --- events from the executor -------------------------------------------------------------


def task_event_record(*, task_id: uuid.UUID, event: Event) -> bool:
    """Persist one executor event and apply it to the task. False if the task had ended."""
    recorded = task_events_record(task_id=task_id, events=[event])
    if recorded.error is not None:
        raise recorded.error
    return recorded.count == 1


class _HeldWrites:
    """The writes of a batch of a run's events that nothing in the batch reads back: their
    event rows and the moves of the task between state counts. `task_events_record` sends
    them with the task's UPDATE in one round trip, and the count moves as one net upsert (an
    echo run's submitted -> working -> completed is one statement: -1 submitted,
    +1 completed), where each was a statement of its own."""

    def __init__(self) -> None:
        self.events: list[TaskEvent] = []
        self.counts: dict[str, int] = {}

    def write(self, task: Task) -> None:
        for event in self.events:
            rowsql.insert(event)
        _task_counts_write(task, [(s, d) for s, d in self.counts.items() if d])


# Set while `task_events_record` applies a batch: `_event_insert` and `_task_counts_move`
# hold their writes in it instead of sending them.
_held_writes: ContextVar[_HeldWrites | None] = ContextVar("held_writes", default=None)


class Recorded(NamedTuple):
    """What `task_events_record` did: how many events it stored; the error of the first that
    was not valid, if one was; whether the task ended, and so was released from its run; and,
    when it did, whether runs of the tenant waited in its lane then (read in the same round
    trip: only then does the run's end hand one over, tasks_app.runtime)."""

    count: int
    error: InvalidAgentResponseError | None
    released: bool
    lane_waiting: bool = True


def task_events_record(*, task_id: uuid.UUID, events: Sequence[Event]) -> Recorded:
    """Persist executor events of one task, in order, in one transaction, and apply them to the
    task; the doorbell rings once, for the last. If one is not valid, the events before it are
    kept, it and those after it are not (`Recorded.error`). Events that come after the task
    ended are ignored. An event that ends the task also ends the run's hold on it (what
    `task_release` would do next, in the same statement)."""
    recorded = 0
    last_kind = ""
    with transaction.atomic():
        task = rowsql.lock(Task, task_id)
        if task is None:
            raise Task.DoesNotExist(task_id)
        error = None
        held = _HeldWrites()
        holding = _held_writes.set(held)
        try:
            for event in events:
                if task.is_terminal:
                    logger.info(
                        "Ignoring %s for task %s: it is already %s",
                        type(event).__name__,
                        task_id,
                        task.state,
                    )
                    continue
                try:
                    last_kind = _event_apply(task, event)
                except InvalidAgentResponseError as exc:  # raised before anything was changed
                    error = exc
                    break
                recorded += 1
        finally:
            _held_writes.reset(holding)
        if not recorded:
            return Recorded(0, error, False)
        released = task.is_terminal
        if released:
            task.running_since = task.lease_expires_at = None
            task.runner = ""
        waiting = lanes.waiting_read(task.tenant_id) if released else None
        with rowsql.together(read=waiting) as batch:
            held.write(task)
            rowsql.update(task, EVENT_FIELDS + RUN_FIELDS if released else EVENT_FIELDS)
        task_pk, seq, state = task.pk, task.last_seq, task.state
        transaction.on_commit(lambda: _ring(task_pk, seq, last_kind, state))
    lane_waiting = batch.row is None or bool(batch.row[0])
    return Recorded(recorded, error, released, lane_waiting)


def _event_apply(task: Task, event: Event) -> str:
    """Apply one executor event to the (locked) task and store it, without its ring; its kind.
    Raises InvalidAgentResponseError, before changing anything, if the event is not valid."""
    _event_check_ids(task, event)
    if isinstance(event, TaskProto):
        kind, apply, response = TaskEvent.Kind.TASK, _apply_task, None
    elif isinstance(event, TaskStatusUpdateEvent):
        kind, apply = TaskEvent.Kind.STATUS, _apply_status
        response = StreamResponse(status_update=event)
    elif isinstance(event, TaskArtifactUpdateEvent):
        kind, apply = TaskEvent.Kind.ARTIFACT, _apply_artifact
        response = StreamResponse(artifact_update=event)
    elif isinstance(event, MessageProto):
        kind, apply = TaskEvent.Kind.MESSAGE, _apply_message
        response = StreamResponse(message=event)
    else:
        raise InvalidAgentResponseError(f"The agent emitted an unknown event {event!r}.")
    apply(task, event)
    if response is None:  # a whole task: the event is the task as it now stands
        response = StreamResponse(task=task_to_proto(task))
    _event_append(task, kind, response, ring=False)
    return kind


# What applying an executor's event may change on the task row (the rest is other rows).
EVENT_FIELDS = (
    "state",
    "status_message",
    "status_timestamp",
    "metadata",
    "last_seq",
    "reply_message_id",
)
# A run's hold on the task, which `task_release` ends.
RUN_FIELDS = ("running_since", "lease_expires_at", "runner")


def _event_check_ids(task: Task, event: Event) -> None:
    event_task_id = event.id if isinstance(event, TaskProto) else event.task_id
    if event_task_id and event_task_id != str(task.pk):
        raise InvalidAgentResponseError(
            f"The agent emitted an event for task {event_task_id!r} while running {task.pk}."
        )
    if event.context_id and event.context_id != task.context_id:
        raise InvalidAgentResponseError(
            f"The agent emitted an event for context {event.context_id!r}; the task's is "
            f"{task.context_id!r}."
        )


def _apply_task(task: Task, event: TaskProto) -> None:
    if event.HasField("status") and event.status.state != TaskState.TASK_STATE_UNSPECIFIED:
        _set_status(
            task,
            event.status.state,
            event.status.message if event.status.HasField("message") else None,
        )
    if event.HasField("metadata"):
        task.metadata = {**task.metadata, **_dict(event.metadata)}
    for artifact in event.artifacts:
        _artifact_upsert(task, artifact, append=False)


def _apply_status(task: Task, event: TaskStatusUpdateEvent) -> None:
    if event.status.state == TaskState.TASK_STATE_UNSPECIFIED:
        raise InvalidAgentResponseError("The agent sent a status update without a state.")
    _set_status(
        task, event.status.state, event.status.message if event.status.HasField("message") else None
    )
    if event.HasField("metadata"):
        task.metadata = {**task.metadata, **_dict(event.metadata)}


def _status_message_to_history(task: Task) -> None:
    """As the SDK's TaskManager does: a status message that is replaced, or answered by a new
    message, moves into the history, so the history reads in the order things were said."""
    if task.status_message:
        if not task.status_message.get("metadata", {}).get(LANE_NOTE):
            _history_append(task, ParseDict(task.status_message, MessageProto()))
        task.status_message = None


def _set_status(task: Task, state: int, message: MessageProto | None) -> None:
    _status_message_to_history(task)
    name = TaskState.Name(state)
    if name != task.state:
        _task_counts_move(task, task.state, name)
    task.state = name
    task.status_message = _dict(message) if message is not None else None
    task.status_timestamp = timezone.now()


def _task_counts_move(task: Task, old: str | None, new: str) -> None:
    """Count the task in state `new` instead of `old` (None: a new task), in the caller's
    transaction. Every change of a task's state must come through here (or `_set_status`), or
    ListTasks' totalSize drifts (until `task_counts_reconcile`)."""
    held = _held_writes.get()
    if held is not None:
        for state, delta in ((new, 1), (old, -1)):
            if state:
                held.counts[state] = held.counts.get(state, 0) + delta
        return
    _task_counts_write(task, [(new, 1)] + ([(old, -1)] if old else []))


def _task_counts_write(task: Task, deltas: list[tuple[str, int]]) -> None:
    """Add each (state, delta) to the task's counts, in one statement."""
    if not deltas:
        return
    shard = task.pk.int % TASK_COUNT_SHARDS
    # In key order: two transactions moving tasks between the same states in opposite
    # directions (working <-> input-required) lock the rows in the same order, never a cycle.
    deltas = sorted(deltas)
    table = connection.ops.quote_name(TaskCount._meta.db_table)
    rows = ", ".join(["(%s, %s, %s, %s, %s)"] * len(deltas))
    # An upsert, on PostgreSQL and SQLite alike: the first task of a key creates its row.
    rowsql.execute(
        f"INSERT INTO {table} (agent_id, owner, state, shard, n) VALUES {rows} "
        "ON CONFLICT (agent_id, owner, state, shard) "
        f"DO UPDATE SET n = {table}.n + EXCLUDED.n",
        [v for s, d in deltas for v in (task.agent_id, task.owner, s, shard, d)],
    )


def task_counts_reconcile(*, agent_id: int | None = None) -> int:
    """Make the task counts match the tasks again (after processes of a version that did not
    keep them changed tasks, say); returns how many (agent, owner, state) counts were off.

    Safe while tasks change, without locking them: the drift is measured in one statement, so
    tasks and counts are read in one snapshot, and is then added as a delta; changes committed
    meanwhile moved a task and its count together, so they leave the drift as it was."""
    tasks = connection.ops.quote_name(Task._meta.db_table)
    counts = connection.ops.quote_name(TaskCount._meta.db_table)
    where, params = ("WHERE agent_id = %s", [agent_id, agent_id]) if agent_id else ("", [])
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT agent_id, owner, state, SUM(d) FROM ("
            f"SELECT agent_id, owner, state, COUNT(*) AS d FROM {tasks} {where} "
            "GROUP BY agent_id, owner, state UNION ALL "
            f"SELECT agent_id, owner, state, -SUM(n) AS d FROM {counts} {where} "
            "GROUP BY agent_id, owner, state"
            ") drift GROUP BY agent_id, owner, state HAVING SUM(d) <> 0 "
            "ORDER BY agent_id, owner, state",
            params,
        )
        drift = cursor.fetchall()
        for agent, owner, state, delta in drift:
            cursor.execute(
                f"INSERT INTO {counts} (agent_id, owner, state, shard, n) "
                "VALUES (%s, %s, %s, 0, %s) ON CONFLICT (agent_id, owner, state, shard) "
                f"DO UPDATE SET n = {counts}.n + EXCLUDED.n",
                [agent, owner, state, delta],
            )
    if drift:
        logger.warning("Task counts were off for %d (agent, owner, state) keys", len(drift))
    return len(drift)


def _apply_artifact(task: Task, event: TaskArtifactUpdateEvent) -> None:
    if not event.artifact.artifact_id:
        raise InvalidAgentResponseError("The agent sent an artifact without an artifactId.")
    _artifact_upsert(task, event.artifact, append=event.append)
    task.status_timestamp = timezone.now()


def _artifact_upsert(task: Task, artifact: ArtifactProto, *, append: bool) -> None:
    new = Artifact(task=task, artifact_id=artifact.artifact_id, data=_dict(artifact))
    if rowsql.append(new, within="task", order="position", unique=("task", "artifact_id")):
        return  # a new artifact, after the others
    row = task.artifacts.get(artifact_id=artifact.artifact_id)
    if append:
        merged = ParseDict(row.data, ArtifactProto())
        artifact_parts_append(merged, artifact.parts)
        if artifact.HasField("metadata"):
            merged.metadata.update(_dict(artifact.metadata))
        row.data = _dict(merged)
    else:
        row.data = _dict(artifact)
    row.save(update_fields=["data", "updated_at"])


def _apply_message(task: Task, message: MessageProto) -> None:
    if message.role != Role.ROLE_AGENT:
        raise InvalidAgentResponseError("A message from the agent must have role ROLE_AGENT.")
    stored = MessageProto()
    stored.CopyFrom(message)
    stored.context_id = task.context_id
    _status_message_to_history(task)
    _history_append(task, stored)
    # A direct reply ends the exchange: the task is kept (nothing is lost) as completed.
    task.reply_message_id = message.message_id
    _set_status(task, TaskState.TASK_STATE_COMPLETED, None)


# --- cancel, claim, end -------------------------------------------------------------------


def task_cancel_request(
    *, agent: Agent, principal: Principal, task_id: str
) -> tuple[uuid.UUID, bool, int]:
    """Ask for a task to stop. Returns (task id, whether a worker still has to confirm, the
    last event seq at the request)."""
    with transaction.atomic():
        task = task_get_row(agent=agent, principal=principal, task_id=task_id, for_update=True)
        if task.is_terminal:
            raise TaskNotCancelableError(
                f"Task {task_id} is already {task.state}; only unfinished tasks can be canceled."
            )
        task.cancel_requested = True
        running = task.running_since is not None
        if running and task.runner:
            # The worker running it hears this at once; its heartbeat would, within seconds.
            runner, task_pk = task.runner, task.pk
            transaction.on_commit(lambda: ring_runner(runner, task_pk))
        if not running and task.state in INTERRUPTED_STATES and _cancels_outside_runs(agent):
            # The agent's work goes on outside (an upstream task waiting for input): its
            # executor's cancel() runs on a worker once the task is canceled here.
            task_pk = task.pk
            transaction.on_commit(lambda: _enqueue_cancel(task_pk))
        if not running:
            # Nothing runs it: end it now, and drop the queued job if there is one.
            _platform_status(task, TaskState.TASK_STATE_CANCELED, "Canceled before the agent ran.")
            job_id, task.job_id, task.job_args, task.job_queued_at = task.job_id, "", None, None
            if job_id and not task.held:  # a run in flight that will not run: the lane has room
                tenant_id = task.tenant_id
                transaction.on_commit(lambda: _lane_hand_over(tenant_id, agent))
            task.held = False
            transaction.on_commit(lambda: _revoke(job_id))
        task.save()
        return task.pk, running, task.last_seq


def _lane_hand_over(tenant_id: int, agent: Agent) -> None:
    try:
        lanes.promote(tenant_id=tenant_id, agent=agent)
    except Exception:  # the reaper's next round hands it over
        logger.warning("Handing over the lane of tenant %s failed", tenant_id, exc_info=True)


def _cancels_outside_runs(agent: Agent) -> bool:
    from agents.executors import REGISTRY

    kind = REGISTRY.get(agent.executor_kind)
    return kind is not None and kind.cancels_outside_runs


def _enqueue_cancel(task_pk: uuid.UUID) -> None:
    from .tasks import cancel_outside_run_task

    try:
        cancel_outside_run_task.delay(str(task_pk))
    except Exception:  # the task is canceled here all the same; only the outside may go on
        logger.warning("Could not queue the outside cancel of task %s", task_pk, exc_info=True)


def task_end(*, task_id: uuid.UUID, state: int, reason: str) -> bool:
    """End a task that has not ended on the platform's own authority (failed by the reaper,
    canceled when the agent ignored a cancel), with `reason` as the status message."""
    with transaction.atomic():
        task = Task.objects.select_for_update().get(pk=task_id)
        if task.is_terminal:
            return False
        _platform_status(task, state, reason)
        task.save()
        return True


# The metadata key of the platform's notes that say why a run waits in its tenant's lane: such
# a note is the task's status message only until the run starts, and never enters the history
# (an agent would read it as part of the conversation).
LANE_NOTE = "a2a-platform/lane"


def _platform_status(task: Task, state: int, text: str, *, transient: bool = False) -> None:
    """A status event the platform writes for the task (not its agent), saying why;
    `transient`: a lane note (LANE_NOTE), dropped when the status moves on."""
    note = MessageProto(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_AGENT,
        task_id=str(task.pk),
        context_id=task.context_id,
    )
    note.parts.add(text=text)
    if transient:
        note.metadata.update({LANE_NOTE: True})
    _set_status(task, state, note)
    event = TaskStatusUpdateEvent(task_id=str(task.pk), context_id=task.context_id)
    event.status.CopyFrom(task_status(task))
    _event_append(task, TaskEvent.Kind.STATUS, StreamResponse(status_update=event))


def task_lane_note(*, task_id: uuid.UUID, text: str) -> bool:
    """Say in a new task's status (still `submitted`) why its run has not started: it waits in
    its tenant's lane. Once per task, while it has said nothing else (its creation is its only
    event) and still waits; False otherwise, or when another process holds the row."""
    with transaction.atomic():
        task = (
            Task.objects.select_for_update(skip_locked=True)
            .filter(pk=task_id, held=True, last_seq=1, state=SUBMITTED)
            .first()
        )
        if task is None:
            return False
        _platform_status(task, TaskState.TASK_STATE_SUBMITTED, text, transient=True)
        task.save()
        return True


def _revoke(job_id: str) -> None:
    if not job_id:
        return
    try:
        from a2a_platform.celery import app

        app.control.revoke(job_id)
    except Exception:  # the broker may not support broadcast; the worker re-checks state anyway
        logger.warning("Could not revoke job %s; the worker will skip it", job_id, exc_info=True)


@functools.cache
def _claim_sql() -> str:
    """`task_claim`'s UPDATE, written once: through the ORM it cost 600 µs of CPU a run,
    written once 210 (docs/decisions.md, "Request hot paths"). It is
    `Task.objects.filter(pk=..., running_since__isnull=True, job_id=..., held=False)
    .exclude(state__in=TERMINAL_STATES).update(...)`, on every database."""
    table, c = rowsql.names(Task)
    terminal = ", ".join(["%s"] * len(TERMINAL_STATES))
    return (
        f"UPDATE {table} SET {c['running_since']} = %s, {c['lease_expires_at']} = %s, "
        f"{c['runner']} = %s, {c['job_id']} = '', "
        f"{c['job_queued_at']} = NULL WHERE {c['id']} = %s AND {c['running_since']} IS NULL "
        f"AND {c['job_id']} = %s AND NOT {c['held']} AND {c['state']} NOT IN ({terminal})"
    )


def task_claim(*, task_id: uuid.UUID, job_id: str, runner: str = "") -> str:
    """Take the task for the run of job `job_id` on worker `runner`.

    Returns 'claimed'; 'busy' when the previous run has not released the task yet; or 'ended'
    when there is nothing to run: the task ended, or this job was already claimed (a broker
    redelivery) or replaced.
    """
    now = timezone.now()
    lease = now + timedelta(seconds=settings.A2A_TASK_LEASE_SECONDS)
    field = Task._meta.get_field
    params = [
        field("running_since").get_db_prep_save(now, connection),
        field("lease_expires_at").get_db_prep_save(lease, connection),
        runner,
        Task._meta.pk.get_db_prep_save(task_id, connection),
        job_id,
        *sorted(TERMINAL_STATES),
    ]
    with rowsql.cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        claimed = cursor.rowcount
    if claimed:
        return "claimed"
    row = Task.objects.filter(pk=task_id).values_list("state", "job_id", "runner", "held").first()
    if row is None or row[0] in TERMINAL_STATES or row[3]:
        return "ended"  # (held: a copy of a job its lane has not handed over; it will)
    if runner and row[2] == runner and row[1] == "":
        # This worker's own claim, made by a try whose answer the database never sent (its
        # connection was lost after the commit): the run goes on.
        return "claimed"
    return "ended" if row[1] != job_id else "busy"


def tasks_heartbeat(*, runner: str, task_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Renew, in one UPDATE, the leases of the runs worker `runner` has in flight (`task_ids`:
    a row naming the worker that no run of it holds any more, one whose release was lost with
    the database, lapses for the reaper); return those with a cancel request (the safety net
    under the cancel doorbell)."""
    lease = timezone.now() + timedelta(seconds=settings.A2A_TASK_LEASE_SECONDS)
    _runs_of(runner, task_ids).update(lease_expires_at=lease)
    return tasks_cancel_requested(runner=runner, task_ids=task_ids)


def tasks_cancel_requested(*, runner: str, task_ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Those of the runs worker `runner` has in flight that a caller asked to cancel."""
    canceled = _runs_of(runner, task_ids).filter(cancel_requested=True)
    return list(canceled.values_list("pk", flat=True))


def _runs_of(runner: str, task_ids: Sequence[uuid.UUID]) -> QuerySet[Task]:
    return Task.objects.filter(pk__in=task_ids, runner=runner, running_since__isnull=False)


def task_release(*, task_id: uuid.UUID, executor_returned: bool = False, runner: str = "") -> None:
    """End a run's hold on the task. A cancel that arrived as the run was ending is honoured
    here, so the canceling caller does not wait for a worker that is gone. After an executor
    returned (`executor_returned`), a task it left neither ended nor waiting for input is
    failed: nothing would ever move it again.

    With `runner`, only that worker's run is released: a release made again after its answer
    was lost with the database finds the task free, or held by the next turn's run, and leaves
    it as it is."""
    # The usual end, in one statement: the run settled the task and nobody asked to cancel.
    settled = Task.objects.filter(pk=task_id).filter(
        Q(cancel_requested=False) | Q(state__in=TERMINAL_STATES)
    )
    if runner:
        settled = settled.filter(runner=runner, running_since__isnull=False)
    if executor_returned:
        settled = settled.filter(state__in=[*TERMINAL_STATES, *INTERRUPTED_STATES])
    if settled.update(
        running_since=None, lease_expires_at=None, runner="", updated_at=timezone.now()
    ):
        return
    with transaction.atomic():
        task = Task.objects.select_for_update().filter(pk=task_id).first()
        if task is None or (runner and (task.runner != runner or task.running_since is None)):
            return
        task.running_since = None
        task.lease_expires_at = None
        task.runner = ""
        if task.cancel_requested and not task.is_terminal:
            _platform_status(
                task, TaskState.TASK_STATE_CANCELED, "Canceled at the caller's request."
            )
        elif executor_returned and not task.is_terminal and task.state not in INTERRUPTED_STATES:
            _platform_status(
                task,
                TaskState.TASK_STATE_FAILED,
                f"The agent's executor returned while the task was still {task.state}.",
            )
        task.save()


def task_handback(
    *, task_id: uuid.UUID, job_id: str, job_args: dict[str, Any], runner: str, lost: str = ""
) -> bool:
    """Give a run that worker `runner` did not finish back to the queue: the task waits for job
    `job_id` again, and a fresh copy of the job is queued for another worker. False when there
    is nothing to hand back: the task ended, a cancel ends it now, or the run is no longer the
    worker's (its lease lapsed and the reaper dealt with it).

    The worker was stopping, or the run lost its database connection (`lost`, the error): then
    the agent's `worker_loss` policy decides, as for a run whose worker died, and the task says
    what happened in a status event; with `fail`, or no attempt left, the task fails. A run
    that had already asked for input is only released, as the reaper does: its turn was over.

    Made again after its answer was lost with the database, a hand-back that had committed
    queues the job it had been about to queue (Django drops the callbacks of a commit that
    raised); a second copy of a job is harmless, as only one claim of it succeeds."""
    with transaction.atomic():
        # The task's row only: a lock on the agent's would hold up every send to it meanwhile.
        locked = Task.objects.select_for_update(of=("self",)).select_related("agent")
        task = locked.filter(pk=task_id).first()
        if task is None:
            return False
        if task.runner != runner or task.running_since is None:
            # Not the worker's run any more; or this hand-back committed in a try whose answer
            # was lost, and the task still waits for the job (a claim empties `job_id`).
            return not task.is_terminal and task_job_requeue(
                task_id=task_id, job_id=job_id, job_args=job_args
            )
        task.running_since = None
        task.lease_expires_at = None
        task.runner = ""
        if task.cancel_requested and not task.is_terminal:
            _platform_status(
                task, TaskState.TASK_STATE_CANCELED, "Canceled at the caller's request."
            )
        elif task.state in INTERRUPTED_STATES:
            task.save()
            return False
        elif lost and not task.is_terminal:
            lost = f"The run lost its database connection ({lost})"
            if _worker_loss_retries(task):
                _platform_status(task, TaskState.Value(task.state), _starts_again(task, lost))
            else:
                _platform_status(
                    task, TaskState.TASK_STATE_FAILED, f"{lost}; the platform failed the task."
                )
        if task.is_terminal:
            task.save()
            return False
        task.job_id, task.job_args, task.job_queued_at = job_id, job_args, timezone.now()
        # The next run does the turn again: it is told so (its attempt), as after a lost worker.
        task.attempt += 1
        task.save()
        transaction.on_commit(lambda: enqueue_run(task_id, job_id, job_args), robust=True)
        return True


def task_job_requeue(*, task_id: uuid.UUID, job_id: str, job_args: dict[str, Any]) -> bool:
    """Queue a copy of a job a stopping worker received but never claimed, if the task still
    waits for it (a copy that finds it claimed or replaced does nothing)."""
    waiting = Task.objects.filter(pk=task_id, job_id=job_id, running_since__isnull=True)
    if not waiting.exists():
        return False
    enqueue_run(task_id, job_id, job_args)
    return True


def tasks_requeue_lost_jobs(*, now: Any = None, broker_started_at: Any = None) -> list[uuid.UUID]:
    """Queue again the runs that no worker claimed: those queued before the broker last
    started (`broker_started_at`: a restart may have lost them), and any waiting longer than
    `A2A_REQUEUE_AFTER_SECONDS` (a purge, a lost message).

    If the broker did not lose a job, the worker that finally gets the old copy finds it
    already claimed and does nothing, so the requeue is safe either way; the requeue moves the
    job's `job_queued_at` on, so a job is queued again once per broker start.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.A2A_REQUEUE_AFTER_SECONDS)
    if broker_started_at is not None:
        cutoff = max(cutoff, min(broker_started_at, now))
    waiting = (
        Task.objects.exclude(job_id="")
        .exclude(state__in=TERMINAL_STATES)
        .filter(running_since__isnull=True, job_queued_at__lt=cutoff, job_args__isnull=False)
        .filter(held=False)  # a run in its lane is handed over by the lane
    )
    requeued = []
    for task_pk, job_id, job_args in waiting.values_list("pk", "job_id", "job_args"):
        still_waiting = Task.objects.filter(
            pk=task_pk, job_id=job_id, running_since__isnull=True, job_queued_at__lt=cutoff
        )
        if still_waiting.update(job_queued_at=now):
            enqueue_run(task_pk, job_id, job_args)
            requeued.append(task_pk)
    return requeued


def tasks_delete_expired(*, now: Any = None, batch: int = 500) -> int:
    """Delete up to `batch` tasks that ended more than `A2A_TASK_RETENTION_DAYS` ago, with all
    they hold (history, artifacts, events, push configs and deliveries: the cascade), and take
    them off the task counts, in one transaction. Rows another process is deleting meanwhile
    are skipped, so none is counted off twice. Returns how many went; 0 when retention is off.
    An ended task never changes again, so its counted state is the one read here."""
    if not settings.A2A_TASK_RETENTION_DAYS:
        return 0
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.A2A_TASK_RETENTION_DAYS)
    with transaction.atomic():
        expired = list(
            Task.objects.select_for_update(skip_locked=True)
            .filter(state__in=TERMINAL_STATES, status_timestamp__lt=cutoff)
            .only("pk", "agent_id", "owner", "state")[:batch]
        )
        if not expired:
            return 0
        Task.objects.filter(pk__in=[task.pk for task in expired]).delete()
        for task in expired:
            _task_counts_write(task, [(task.state, -1)])
    return len(expired)


def sent_messages_forget(*, now: Any = None) -> int:
    """Forget the messageIds sent longer ago than `A2A_MESSAGE_ID_RETENTION_SECONDS`: a send
    repeating one then makes a new task (or turn)."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.A2A_MESSAGE_ID_RETENTION_SECONDS)
    return SentMessage.objects.filter(created_at__lt=cutoff).delete()[0]


def tasks_reap(*, now: Any = None) -> list[uuid.UUID]:
    """Deal with the runs whose worker stopped renewing their lease (it crashed or was
    killed): by the agent's `worker_loss` policy, start the run again on another worker while
    it has attempts left, or fail the task. Returns the tasks failed or started again.

    A task that had already asked for input is only released: its run was over.
    """
    now = now or timezone.now()
    reaped = []
    stale = Task.objects.filter(running_since__isnull=False, lease_expires_at__lt=now)
    for task_id, state, lease in stale.values_list("pk", "state", "lease_expires_at"):
        lost = (
            "The worker running this task stopped responding (its lease expired at "
            f"{lease:%Y-%m-%d %H:%M:%S} UTC)"
        )
        if state not in INTERRUPTED_STATES:
            if task_retry_after_worker_loss(task_id=task_id, lost=lost, now=now):
                reaped.append(task_id)
                continue
            if task_end(
                task_id=task_id,
                state=TaskState.TASK_STATE_FAILED,
                reason=f"{lost}; the platform failed the task.",
            ):
                reaped.append(task_id)
        task_release(task_id=task_id)
    return reaped


def _worker_loss_retries(task: Task) -> bool:
    """Whether a run of `task` that was lost (its worker, or its database connection) starts
    again: its agent's `worker_loss` is `retry` and the turn has an attempt left."""
    agent = task.agent
    return agent.worker_loss == agent.WorkerLoss.RETRY and task.attempt < agent.worker_loss_attempts


def _starts_again(task: Task, lost: str) -> str:
    """The status message of a lost run started again, as its next attempt."""
    attempts = task.agent.worker_loss_attempts
    return f"{lost}; the run starts again (attempt {task.attempt + 1} of {attempts})."


def task_retry_after_worker_loss(*, task_id: uuid.UUID, lost: str, now: Any) -> bool:
    """Queue the run of a task whose worker died again, if its agent says `retry` and the turn
    has attempts left: the task says so in a status event (its state unchanged), and the next
    run is told its attempt. False, with nothing changed, otherwise (the caller fails it)."""
    with transaction.atomic():
        # The task's row only: a lock on the agent's would hold up every send to it meanwhile.
        locked = Task.objects.select_for_update(of=("self",)).select_related("agent")
        task = locked.filter(pk=task_id).first()
        if (
            task is None
            or task.is_terminal
            or task.running_since is None
            or task.lease_expires_at is None
            or task.lease_expires_at >= now  # its worker renewed it meanwhile
            or task.cancel_requested
            or not _worker_loss_retries(task)
            or not task.job_args
        ):
            return False
        _platform_status(task, TaskState.Value(task.state), _starts_again(task, lost))
        task.attempt += 1
        attempts = task.agent.worker_loss_attempts
        task.running_since = task.lease_expires_at = None
        task.runner = ""
        task.job_id, task.job_queued_at = str(uuid.uuid4()), timezone.now()
        task.save()
        job_id, job_args = task.job_id, task.job_args
        transaction.on_commit(lambda: enqueue_run(task_id, job_id, job_args), robust=True)
    logger.warning(
        "Task %s: its worker died; attempt %d of %d queued", task_id, task.attempt, attempts
    )
    return True


def executor_state_save(*, task_id: uuid.UUID, data: dict[str, Any]) -> None:
    """Keep what a task's executor needs on its next run (selectors.executor_state)."""
    ExecutorState.objects.update_or_create(task_id=task_id, defaults={"data": data})
