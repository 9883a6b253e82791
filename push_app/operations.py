"""The push notification config operations as every binding calls them: async, keyword
arguments, one call per protocol method (the task operations are in tasks_app.operations)."""

from __future__ import annotations

from a2a.types import (
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)

from a2a_platform.db import db
from a2a_platform.versions import V1_0
from tasks_app.errors import InvalidParamsError
from tasks_app.operations import Caller, check_tenant, permit

from . import selectors, services
from .errors import push_not_offered


def _push_check(caller: Caller) -> None:
    permit(caller, "push")
    if not caller.agent.push_notifications:
        raise push_not_offered()


async def push_config_create(
    *, caller: Caller, config: TaskPushNotificationConfig, headers: dict[str, str] | None = None
) -> TaskPushNotificationConfig:
    """Create (or replace, by id) a config; the caller's dialect shapes what its deliveries
    carry; `headers` are v0.1's free-form ones."""
    check_tenant(caller, config.tenant)
    _push_check(caller)
    return await db(services.push_config_create)(
        agent=caller.agent,
        principal=caller.principal,
        config=config,
        dialect=caller.dialect,
        headers=headers,
    )


async def push_config_get(
    *, caller: Caller, task_id: str, config_id: str, tenant: str = ""
) -> TaskPushNotificationConfig:
    """A config by id; with no id (v0.3 and v0.1 ask so), the task's first config."""
    check_tenant(caller, tenant)
    _push_check(caller)
    if not config_id and caller.dialect == V1_0:
        raise InvalidParamsError("The push notification config 'id' is required.")
    return await db(selectors.push_config_get)(
        agent=caller.agent, principal=caller.principal, task_id=task_id, config_id=config_id
    )


async def push_config_list(
    *, caller: Caller, request: ListTaskPushNotificationConfigsRequest
) -> ListTaskPushNotificationConfigsResponse:
    check_tenant(caller, request.tenant)
    _push_check(caller)
    return await db(selectors.push_config_list)(
        agent=caller.agent,
        principal=caller.principal,
        task_id=request.task_id,
        page_size=request.page_size,
        page_token=request.page_token,
    )


async def push_config_delete(
    *, caller: Caller, task_id: str, config_id: str, tenant: str = ""
) -> None:
    check_tenant(caller, tenant)
    _push_check(caller)
    await db(services.push_config_delete)(
        agent=caller.agent, principal=caller.principal, task_id=task_id, config_id=config_id
    )
