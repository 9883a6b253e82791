"""Reads of push notification configs, scoped as the caller's tasks are, and the delivery
counts /metrics scrapes.

A config's secrets (its `token`, its `authentication.credentials`, v0.1's `headers`) are
write-only: nothing here decrypts them, so no answer can carry them. Only a delivery does
(push_app.delivery)."""

from __future__ import annotations

from a2a.types import (
    AuthenticationInfo,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)
from django.db.models import Count

from agents.auth import Principal
from agents.models import Agent
from tasks_app.errors import InvalidParamsError
from tasks_app.selectors import page_within_budget, task_get_row

from .errors import push_config_not_found
from .models import Delivery, DeliveryAttempt, PushConfig

MAX_PAGE_SIZE = 100


def push_config_to_proto(config: PushConfig) -> TaskPushNotificationConfig:
    """The config as a client reads it: its id, task, url and authentication scheme, without
    the token or the credentials (absent, not a placeholder: a client that sends back what it
    read must not store a placeholder as its secret). The answer to a create is this too."""
    proto = TaskPushNotificationConfig(
        id=config.config_id, task_id=str(config.task_id), url=config.url
    )
    if config.auth_scheme:
        proto.authentication.CopyFrom(AuthenticationInfo(scheme=config.auth_scheme))
    return proto


def push_config_row(
    *, agent: Agent, principal: Principal, task_id: str, config_id: str
) -> PushConfig:
    task = task_get_row(agent=agent, principal=principal, task_id=task_id)
    configs = PushConfig.objects.filter(task=task)
    # v0.3 may ask for "the" config of a task without naming it: the first one.
    config = configs.filter(config_id=config_id).first() if config_id else configs.first()
    if config is None:
        raise push_config_not_found(task_id, config_id)
    return config


def push_config_get(
    *, agent: Agent, principal: Principal, task_id: str, config_id: str
) -> TaskPushNotificationConfig:
    return push_config_to_proto(
        push_config_row(agent=agent, principal=principal, task_id=task_id, config_id=config_id)
    )


def push_config_list(
    *, agent: Agent, principal: Principal, task_id: str, page_size: int = 0, page_token: str = ""
) -> ListTaskPushNotificationConfigsResponse:
    task = task_get_row(agent=agent, principal=principal, task_id=task_id)
    if page_size < 0 or page_size > MAX_PAGE_SIZE:
        raise InvalidParamsError(f"'pageSize' must be between 1 and {MAX_PAGE_SIZE}.")
    size = page_size or MAX_PAGE_SIZE
    configs = PushConfig.objects.filter(task=task).order_by("config_id")
    if page_token:
        configs = configs.filter(config_id__gt=page_token)
    rows = list(configs[: size + 1])
    # Bounded in bytes as every list is (tasks_app.selectors.LIST_PAGE_MAX_BYTES), though a
    # config as read is small (a url, ids and a scheme of bounded lengths: the secrets, of any
    # length, are never in it) and a page of 100 stays far under the budget.
    page = page_within_budget(push_config_to_proto(c) for c in rows[:size])
    response = ListTaskPushNotificationConfigsResponse(configs=page)
    if len(rows) > len(page):
        response.next_page_token = rows[len(page) - 1].config_id
    return response


# --- what /metrics scrapes (a2a_platform.metrics) ----------------------------------------------


def delivery_attempt_counts() -> dict[str, int]:
    """Every delivery attempt ever recorded, counted by outcome (delivered, retry, dead)."""
    return dict(DeliveryAttempt.objects.values_list("outcome").annotate(n=Count("pk")).order_by())


def delivery_dead_count() -> int:
    """Deliveries dead-lettered, waiting for an operator to redeliver them."""
    return Delivery.objects.filter(state=Delivery.State.DEAD).count()
