"""The A2A operations as every binding calls them: async, one call per protocol method.

JSON-RPC today, REST and gRPC later, all call these, so a behaviour (how long a blocking send
waits, what a cancel that the agent ignores ends as) is decided once. Each operation calls the
sync services and selectors through `database_sync_to_async` and waits on the doorbell.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import (
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    TaskState,
)
from a2a.types import Message as MessageProto
from a2a.types import Task as TaskProto
from channels.db import database_sync_to_async
from django.conf import settings

from agents.auth import Principal
from agents.cards import agent_card_build
from agents.errors import AuthenticationRequired
from agents.models import Agent

from .doorbell import wait_until
from .models import INTERRUPTED_STATES, TERMINAL_STATES
from .selectors import task_get, task_list, task_send_result
from .services import message_send, task_cancel_request, task_end


@dataclass(frozen=True)
class Caller:
    agent: Agent
    principal: Principal


async def send_message(caller: Caller, request: SendMessageRequest) -> TaskProto | MessageProto:
    outcome = await database_sync_to_async(message_send)(
        agent=caller.agent, principal=caller.principal, request=request
    )
    if not request.configuration.return_immediately:

        def settled(state: str, seq: int) -> bool:
            # An interrupted state counts only once reached after this message: a follow-up
            # to an input-required task must not return before the agent has seen it.
            return state in TERMINAL_STATES or (
                state in INTERRUPTED_STATES and seq > outcome.since_seq
            )

        await wait_until(outcome.task_id, settled, settings.A2A_BLOCKING_TIMEOUT_SECONDS)
    configuration = request.configuration
    return await database_sync_to_async(task_send_result)(
        task_id=outcome.task_id,
        history_length=(
            configuration.history_length if configuration.HasField("history_length") else None
        ),
    )


async def cancel_task(caller: Caller, task_id: str) -> TaskProto:
    task_pk, running = await database_sync_to_async(task_cancel_request)(
        agent=caller.agent, principal=caller.principal, task_id=task_id
    )
    if running:
        timeout = settings.A2A_CANCEL_TIMEOUT_SECONDS
        # The worker gets the cancel timeout for executor.cancel() plus a margin to record it.
        await wait_until(task_pk, lambda state, seq: state in TERMINAL_STATES, timeout + 2)
        await database_sync_to_async(task_end)(
            task_id=task_pk,
            state=TaskState.TASK_STATE_CANCELED,
            reason=f"The agent did not stop within {timeout:g} s; the platform canceled the task.",
        )
    return await database_sync_to_async(task_get)(
        agent=caller.agent, principal=caller.principal, task_id=task_id
    )


async def get_task(caller: Caller, request: GetTaskRequest) -> TaskProto:
    return await database_sync_to_async(task_get)(
        agent=caller.agent,
        principal=caller.principal,
        task_id=request.id,
        history_length=request.history_length if request.HasField("history_length") else None,
    )


async def list_tasks(caller: Caller, request: ListTasksRequest) -> ListTasksResponse:
    return await database_sync_to_async(task_list)(
        agent=caller.agent, principal=caller.principal, request=request
    )


async def get_extended_card(caller: Caller) -> AgentCard:
    if caller.principal.is_anonymous:
        raise AuthenticationRequired("The extended agent card requires an API key.")
    return await database_sync_to_async(agent_card_build)(caller.agent, extended=True)
