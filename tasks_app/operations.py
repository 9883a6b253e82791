"""The A2A operations as every binding calls them: async, one call per protocol method,
keyword arguments, named `<entity>_<action>` as the services are.

JSON-RPC, REST and gRPC (bindings/) all call these, so a behaviour (how long a blocking send
waits, what a cancel that the agent ignores ends as, what a stream sends first) is decided
once. They call the sync services and selectors on the process's database threads
(`a2a_platform.db.db`, never a thread per request) and follow the task's event log
(tasks_app.streams) to wait. Push notification configs have theirs in push_app.operations.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from a2a.types import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from django.conf import settings

from a2a_platform import drain
from a2a_platform.db import db
from a2a_platform.metrics import timed_send, timed_send_stream
from a2a_platform.versions import V1_0
from agents.auth import Principal
from agents.card_signatures import agent_card_extended
from agents.errors import AuthenticationRequired, RequestError
from agents.identity import resource_metadata_of, scope_check
from agents.models import Agent

from . import selectors, services
from .doorbell import hearing_every_ring
from .errors import InvalidParamsError, UnsupportedOperationError
from .models import TERMINAL_STATES
from .selectors import TaskOrigin
from .services import SendOutcome
from .streams import SETTLED_STATES, EventFollower, StreamItem

Stream = AsyncIterator[StreamItem | None]  # None: nothing new for a while (send a keep-alive)


class ServerDraining(RequestError):
    """A stream cut because its process is stopping (a2a_platform.drain): nothing is lost, and
    the client resumes on another process. SSE ends the stream with a `retry:` hint instead
    (bindings.sse); gRPC answers UNAVAILABLE, the status its clients retry."""

    http_status = 503
    jsonrpc_code = -32052
    grpc_status = "UNAVAILABLE"
    reason = "SERVER_DRAINING"

    def __init__(self) -> None:
        super().__init__(
            "This server is draining (it is being stopped): the stream ends here, and the task "
            "goes on. Resubscribe to the task (SubscribeToTask; SSE: reconnect with "
            "Last-Event-ID) to go on from the last event received, on another server."
        )


def _stop_if_drained(follower: EventFollower) -> None:
    """After a stream's follower stopped: raise if it stopped for the process's drain."""
    if follower.drained:
        raise ServerDraining()


@dataclass(frozen=True)
class Caller:
    agent: Agent
    principal: Principal
    # The `Last-Event-ID` the client sent (SSE reconnection), if any.
    last_event_id: str | None = None
    # The extensions the client asked for (the A2A-Extensions service parameter); the agent's
    # executor sees them as `context.call_context.requested_extensions`.
    extensions: frozenset[str] = frozenset()
    # The protocol version the call speaks (a2a_platform.versions): push configs created by
    # it deliver in its shape.
    dialect: str = V1_0
    # v0.1's headers for a push config set inline with a send.
    push_headers: tuple[tuple[str, str], ...] = ()
    # How the request spelled what it sent, where a dialect has several spellings: REST v0.3's
    # wire spelling (bindings.codecs.spellings), v0.1's task id written as hex
    # (bindings.codecs.v01.HEX_ID); "" otherwise. A task the call creates keeps it with
    # `dialect` (Task.spelling, Task.dialect).
    spelling: str = ""


def check_tenant(caller: Caller, tenant: str) -> None:
    """v1.0 requests may carry `tenant`. An agent's tenant value is `<tenant>/<agent>` (what
    its URL path holds); a request naming another is refused rather than silently rerouted."""
    expected = f"{caller.agent.tenant.slug}/{caller.agent.slug}"
    if tenant and tenant != expected:
        raise InvalidParamsError(
            f"'tenant' is {tenant[:100]!r} but this agent's tenant value is {expected!r}; send "
            "that value or none."
        )


def permit(caller: Caller, operation: str) -> None:
    """InsufficientScope unless the caller may do this kind of operation (send, read, cancel,
    push): only a token's scopes can fall short (agents.identity)."""
    if caller.principal.scopes_missing:
        scope_check(
            agent=caller.agent, missing=caller.principal.scopes_missing, operation=operation
        )


def _send_permit(caller: Caller, request: SendMessageRequest) -> None:
    permit(caller, "send")
    if request.configuration.HasField("task_push_notification_config") or caller.push_headers:
        permit(caller, "push")


def _deadline(seconds: float) -> float:
    return asyncio.get_running_loop().time() + seconds


def _history_length(request: SendMessageRequest) -> int | None:
    configuration = request.configuration
    return configuration.history_length if configuration.HasField("history_length") else None


async def _send(
    caller: Caller, request: SendMessageRequest, new_task_id: uuid.UUID | None
) -> SendOutcome:
    return await db(services.message_send)(
        agent=caller.agent,
        principal=caller.principal,
        request=request,
        new_task_id=new_task_id,
        extensions=sorted(caller.extensions),
        push_dialect=caller.dialect,
        push_headers=dict(caller.push_headers),
        dialect=caller.dialect,
        spelling=caller.spelling,
    )


@timed_send
async def message_send(
    *, caller: Caller, request: SendMessageRequest, new_task_id: uuid.UUID | None = None
) -> TaskProto | MessageProto:
    """Send and, unless `returnImmediately`, wait for the turn to settle; in a process that
    drains, only until its grace ends (a2a_platform.drain): then the task as it is, so that
    the client keeps its id. `new_task_id` names the task a new conversation creates (v0.1
    clients choose their task ids)."""
    check_tenant(caller, request.tenant)
    _send_permit(caller, request)
    blocking = not request.configuration.return_immediately
    # Known before the message is stored: then every ring for its turn reaches the wait below.
    hearing = blocking and await hearing_every_ring()
    outcome = await _send(caller, request, new_task_id)
    if not blocking and outcome.task is not None:
        return _history_cut(outcome.task, _history_length(request))  # as the send made it
    if blocking:
        # Follow the log from this message on: a follow-up to an input-required task waits for
        # the agent's next settled state, not the one it already had.
        async with EventFollower(outcome.task_id, outcome.since_seq) as follower:
            await follower.settled(
                deadline=_deadline(settings.A2A_BLOCKING_TIMEOUT_SECONDS),
                # A repeated message's turn may have settled long ago: no ring will say so.
                read_first=not hearing or outcome.repeated,
            )
    return await db(selectors.task_send_result)(
        task_id=outcome.task_id, history_length=_history_length(request)
    )


@timed_send_stream
async def message_stream(
    *, caller: Caller, request: SendMessageRequest, new_task_id: uuid.UUID | None = None
) -> Stream:
    """Send, then stream. Errors in the request raise here, before any byte is streamed.

    A client that reconnects by POSTing the same request again with `Last-Event-ID` resumes
    the stream of the task that id names; the message is not sent twice.
    """
    check_tenant(caller, request.tenant)
    _send_permit(caller, request)
    if caller.last_event_id:
        task_id, _, seq = caller.last_event_id.strip().rpartition(":")
        if not task_id or not seq.isdigit():
            raise InvalidParamsError(
                f"Last-Event-ID {caller.last_event_id[:100]!r} is not an event id "
                "(<task-id>:<seq>); send the `id` of the last event received, or no header."
            )
        return await task_subscribe(
            caller=caller, task_id=task_id, last_event_id=caller.last_event_id
        )
    hearing = await hearing_every_ring()  # before the message is stored, as for message_send
    outcome = await _send(caller, request, new_task_id)
    return _send_stream(outcome, _history_length(request), hearing)


async def _send_stream(
    outcome: SendOutcome, history_length: int | None, hearing: bool = False
) -> Stream:
    keepalive = settings.A2A_SSE_KEEPALIVE_SECONDS
    if outcome.created:
        # A new task: the stream opens at once with the task as this send committed it
        # (submitted, the send's own event), before any worker has it, then follows the log.
        # An agent that answers with a Message ends the stream with it (docs/decisions.md).
        if outcome.task is not None:  # its first event, as committed: no need to read it back
            opening = StreamItem(
                outcome.task_id, outcome.since_seq, StreamResponse(task=outcome.task), False
            )
            yield _cut_history(opening, history_length)
            since = outcome.since_seq
        else:  # its first event is in the log, and no ring will say so: read it
            since, hearing = outcome.since_seq - 1, False
        async with EventFollower(outcome.task_id, since) as follower:
            async for item in follower.events(idle=keepalive, read_first=not hearing):
                yield _cut_history(item, history_length)
            _stop_if_drained(follower)
        return
    # A follow-up to an interrupted task: the task as committed still shows the state that
    # ended the last turn (input-required), which would read as this turn's end; the stream
    # opens once the agent has taken the message.
    async with EventFollower(outcome.task_id, outcome.since_seq) as follower:
        first = None
        async with contextlib.aclosing(follower.events(idle=keepalive)) as waiting:
            async for item in waiting:
                if item is not None:
                    first = item
                    break
                yield None
        if first is None:
            _stop_if_drained(follower)
            return
        if first.response.HasField("message"):
            yield first  # the agent answered with a Message: that is the whole stream
            return
        # Otherwise the stream opens with the task as it is now, then follows it from there.
        snapshot = await _snapshot_item(outcome.task_id, history_length)
        follower.seq = snapshot.seq
        yield snapshot
        if snapshot.final:
            return
        async for item in follower.events(idle=keepalive):
            yield item
        _stop_if_drained(follower)


def _cut_history(item: StreamItem | None, history_length: int | None) -> StreamItem | None:
    """A task event with at most `history_length` messages of history, as a snapshot has."""
    if item is None or history_length is None or not item.response.HasField("task"):
        return item
    if len(item.response.task.history) <= history_length:
        return item
    response = StreamResponse(task=_history_cut(item.response.task, history_length))
    return dataclasses.replace(item, response=response)


def _history_cut(task: TaskProto, history_length: int | None) -> TaskProto:
    """`task` with at most `history_length` messages of history (the newest), as GetTask
    reads it; `task` itself is left as it is."""
    if history_length is None or len(task.history) <= history_length:
        return task
    cut = TaskProto()
    cut.CopyFrom(task)
    kept = list(task.history)[len(task.history) - history_length :] if history_length else []
    del cut.history[:]
    cut.history.extend(kept)
    return cut


async def _snapshot_item(
    task_id: uuid.UUID, history_length: int | None = None, ends_at: Collection[str] = SETTLED_STATES
) -> StreamItem:
    seq, task = await db(selectors.task_snapshot)(task_id=task_id, history_length=history_length)
    final = TaskState.Name(task.status.state) in ends_at
    return StreamItem(task_id, seq, StreamResponse(task=task), final)


async def task_subscribe(
    *, caller: Caller, task_id: str, last_event_id: str | None = None, tenant: str = ""
) -> Stream:
    """The task now, then its events; or, after `last_event_id`, exactly the events missed.

    A subscription follows the task until it ends (spec 3.1.6), through input-required turns,
    unlike a send stream, which ends with its turn.
    """
    check_tenant(caller, tenant)
    permit(caller, "read")
    task = await db(selectors.task_get_row)(
        agent=caller.agent, principal=caller.principal, task_id=task_id
    )
    if last_event_id:
        after = _seq_from_event_id(last_event_id, task.pk, task.last_seq)
        if task.is_terminal and after >= task.last_seq:
            return _nothing()  # the client saw the end already: close at once
        return _replay(task.pk, after)
    if task.is_terminal:
        raise UnsupportedOperationError(
            f"Task {task_id} is already {task.state}: there is nothing left to stream. Get it "
            "with GetTask, or resume a dropped stream with its Last-Event-ID."
        )
    return _subscription(task.pk)


def _seq_from_event_id(event_id: str, task_pk: uuid.UUID, last_seq: int) -> int:
    task_part, _, seq_part = event_id.strip().rpartition(":")
    try:
        same_task = uuid.UUID(task_part) == task_pk
        seq = int(seq_part)
    except ValueError:
        same_task, seq = False, -1
    if not same_task or not 0 <= seq <= last_seq:
        raise InvalidParamsError(
            f"Last-Event-ID {event_id[:100]!r} is not an event of task {task_pk}; use the `id` "
            "of the last event received from this task's stream."
        )
    return seq


async def _nothing() -> Stream:
    return
    yield  # an async generator that yields nothing


async def _replay(task_pk: uuid.UUID, after: int) -> Stream:
    async with EventFollower(task_pk, after, ends_at=TERMINAL_STATES) as follower:
        async for item in follower.events(idle=settings.A2A_SSE_KEEPALIVE_SECONDS):
            yield item
        _stop_if_drained(follower)


async def _subscription(task_pk: uuid.UUID) -> Stream:
    async with EventFollower(task_pk, 0, ends_at=TERMINAL_STATES) as follower:
        snapshot = await _snapshot_item(task_pk, ends_at=TERMINAL_STATES)
        follower.seq = snapshot.seq
        yield snapshot
        if snapshot.final:
            return
        async for item in follower.events(idle=settings.A2A_SSE_KEEPALIVE_SECONDS):
            yield item
        _stop_if_drained(follower)


async def task_cancel(
    *, caller: Caller, task_id: str, tenant: str = "", with_origin: bool = False
) -> TaskProto | tuple[TaskProto, TaskOrigin]:
    """Cancel, and answer with the task as the cancel left it; `with_origin`: (the task, how
    its creator spoke), from the same read."""
    check_tenant(caller, tenant)
    permit(caller, "cancel")
    task_pk, running, seq = await db(services.task_cancel_request)(
        agent=caller.agent, principal=caller.principal, task_id=task_id
    )
    if running:
        timeout = settings.A2A_CANCEL_TIMEOUT_SECONDS
        # The worker gets the cancel timeout for executor.cancel() plus a margin to record it.
        async with EventFollower(task_pk, seq, ends_at=TERMINAL_STATES) as follower:
            await follower.settled(deadline=_deadline(timeout + 2))
        # A wait cut short by the process's drain is no sign of an agent that does not stop:
        # the worker, which has the cancel, ends the task itself.
        if not drain.over():
            await db(services.task_end)(
                task_id=task_pk,
                state=TaskState.TASK_STATE_CANCELED,
                reason=(
                    f"The agent did not stop within {timeout:g} s; the platform canceled the task."
                ),
            )
    return await db(selectors.task_get)(
        agent=caller.agent, principal=caller.principal, task_id=task_id, with_origin=with_origin
    )


async def task_get(
    *, caller: Caller, request: GetTaskRequest, as_json: bool = False, with_origin: bool = False
) -> TaskProto | dict[str, Any] | tuple[TaskProto | dict[str, Any], TaskOrigin]:
    """The task GetTask answers with; `as_json`: as its v1.0 JSON (selectors.task_to_json);
    `with_origin`: (that, how the task's creator spoke), read in the same query."""
    check_tenant(caller, request.tenant)
    permit(caller, "read")
    return await db(selectors.task_get)(
        agent=caller.agent,
        principal=caller.principal,
        task_id=request.id,
        history_length=request.history_length if request.HasField("history_length") else None,
        as_json=as_json,
        with_origin=with_origin,
    )


async def task_origin(*, caller: Caller, task_id: str) -> TaskOrigin | None:
    """How the request that created the caller's task spoke, in one query; None when the
    caller cannot see the task (scoped as task_get is: this agent, and the owner's own tasks
    unless the caller is a tenant admin)."""
    return await db(selectors.task_origin)(
        agent=caller.agent, principal=caller.principal, task_id=task_id
    )


async def task_list(
    *,
    caller: Caller,
    request: ListTasksRequest,
    size_of: Callable[[TaskProto], int] | None = None,
) -> ListTasksResponse:
    """A page of the caller's tasks. Pages are bounded in bytes (selectors.LIST_PAGE_MAX_BYTES)
    of the tasks' v1.0 protobuf; `size_of(task)` measures a task instead where the binding's
    answer is another protobuf, so that the bound holds for what it sends."""
    check_tenant(caller, request.tenant)
    permit(caller, "read")
    _check_not_future(request)
    return await db(selectors.task_list)(
        agent=caller.agent, principal=caller.principal, request=request, size_of=size_of
    )


def _check_not_future(request: ListTasksRequest) -> None:
    """A list of the tasks updated after a time still to come is refused, not answered empty:
    the v0.3 endpoint summary lists a future `lastUpdatedAfter` among tasks/list's errors, and
    such a time is a client's clock or unit gone wrong (seconds sent as milliseconds, or
    microseconds), which an empty page would hide. Checked here, for every binding."""
    if not request.HasField("status_timestamp_after"):
        return
    now = datetime.now(UTC)
    try:
        after = request.status_timestamp_after.ToDatetime(UTC)
    except (ValueError, OverflowError, OSError):
        return  # not a time at all: the selector names that
    if after > now:
        millis = request.status_timestamp_after.ToMilliseconds()
        raise InvalidParamsError(
            f"The updated-after time (lastUpdatedAfter, statusTimestampAfter) "
            f"{_iso(after)} ({millis} ms since the epoch) is in the future: this server's time "
            f"is {_iso(now)} ({int(now.timestamp() * 1000)} ms). Send a past time, in "
            "milliseconds for lastUpdatedAfter."
        )


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def extended_card_get(*, caller: Caller) -> AgentCard:
    if caller.principal.is_anonymous:
        raise AuthenticationRequired(
            "The extended agent card requires authentication: send an API key or a token.",
            resource_metadata=resource_metadata_of(caller.agent),
        )
    permit(caller, "read")
    # Signed as the caller's dialect will carry it (agents.card_signatures).
    return await db(agent_card_extended)(caller.agent, dialect=caller.dialect)
