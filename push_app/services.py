"""Push notification configs (CRUD, scoped like tasks) and the outbox every event feeds.

Configs speak v1.0 protos (`TaskPushNotificationConfig`); bindings convert at the edge. A
config's URL passes the SSRF guard when it is created (and the delivery client checks the
address again at connect time). Its token and credentials (v0.1: its headers) are stored
encrypted and are write-only: the answer to a create carries none of them, as no read does.
"""

from __future__ import annotations

import json
import re
import uuid

from a2a.types import (
    TaskPushNotificationConfig,
)
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from a2a_platform.ssrf import UnsafeUrl, url_check
from agents.auth import Principal
from agents.crypto import encrypt
from agents.models import Agent
from tasks_app.errors import InvalidParamsError
from tasks_app.models import Task, TaskEvent
from tasks_app.selectors import task_get_row

from .models import Delivery, PushConfig
from .selectors import push_config_to_proto

# The columns' lengths (PushConfig.url, PushConfig.auth_scheme): longer is refused, not a
# database error.
URL_MAX_LENGTH = PushConfig._meta.get_field("url").max_length
SCHEME_MAX_LENGTH = PushConfig._meta.get_field("auth_scheme").max_length


def push_url_validate(url: str) -> None:
    if not url:
        raise InvalidParamsError("A push notification config needs a 'url'.")
    if len(url) > URL_MAX_LENGTH:
        raise InvalidParamsError(
            f"A push notification 'url' is at most {URL_MAX_LENGTH} characters."
        )
    try:
        # A name that does not resolve now is accepted: each delivery's connection is checked
        # (a2a_platform.ssrf's guarded client), so DNS decides when it matters.
        url_check(url, unresolvable_ok=True)
    except UnsafeUrl as exc:
        raise InvalidParamsError(f"The push notification 'url' is refused: {exc.reason}") from None


# Headers a v0.1 config may not set: the platform writes these itself.
RESERVED_HEADERS = frozenset(
    {"content-type", "content-length", "host", "transfer-encoding", "connection",
     "x-a2a-signature", "user-agent"}
)  # fmt: skip
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}")


def push_headers_validate(headers: dict[str, str]) -> None:
    """v0.1's free-form headers: names and values an HTTP request can carry, none of ours."""
    if len(headers) > 20:
        raise InvalidParamsError("'headers' may hold at most 20 headers.")
    for name, value in headers.items():
        if not isinstance(name, str) or not HEADER_NAME.fullmatch(name):
            raise InvalidParamsError(f"'headers': {str(name)[:100]!r} is not a header name.")
        if name.lower() in RESERVED_HEADERS:
            raise InvalidParamsError(f"'headers': {name} is set by the platform itself.")
        if not isinstance(value, str) or len(value) > 4096 or any(c in value for c in "\r\n\0"):
            raise InvalidParamsError(f"'headers': the value of {name} is not a header value.")


def push_config_set(
    *,
    task: Task,
    config: TaskPushNotificationConfig,
    dialect: str,
    checked: bool = False,
    headers: dict[str, str] | None = None,
) -> TaskPushNotificationConfig:
    """Create, or replace the config with the same id: whole, with the config given, so a
    token or credentials it leaves out are removed, not kept from the old one (which might
    have been for another URL). `task` is already the caller's;
    `checked`: the URL already passed the SSRF guard (inline configs, before the lock)."""
    if not checked:
        push_url_validate(config.url)
    if headers:
        push_headers_validate(headers)
    if config.HasField("authentication") and not config.authentication.scheme:
        raise InvalidParamsError("'authentication.scheme' is required when authentication is set.")
    if len(config.authentication.scheme) > SCHEME_MAX_LENGTH:
        raise InvalidParamsError(
            f"'authentication.scheme' is at most {SCHEME_MAX_LENGTH} characters."
        )
    config_id = config.id or str(uuid.uuid4())
    if len(config_id) > 200:
        raise InvalidParamsError("A push notification config 'id' is at most 200 characters.")
    fields = {
        "url": config.url,
        "token_encrypted": encrypt(config.token) if config.token else "",
        "auth_scheme": config.authentication.scheme if config.HasField("authentication") else "",
        "auth_credentials_encrypted": (
            encrypt(config.authentication.credentials)
            if config.HasField("authentication") and config.authentication.credentials
            else ""
        ),
        "dialect": dialect,
        # What it hears, fixed at creation: the operator's A2A_PUSH_EVENT_KINDS.
        "event_kinds": list(settings.A2A_PUSH_EVENT_KINDS),
        "headers_encrypted": encrypt(json.dumps(headers)) if headers else "",
    }
    # Storing the config flags the task in the database (a trigger, tasks_app migration 0007:
    # its UPDATE takes the task's row lock, so an event being recorded sees the flag and the
    # config together or neither); the caller's copy says so too, for a later save().
    task.has_push_configs = True
    try:
        with transaction.atomic():
            stored, _ = PushConfig.objects.update_or_create(
                task=task, config_id=config_id, defaults=fields
            )
    except IntegrityError:  # a concurrent create of the same id won: replace it
        stored, _ = PushConfig.objects.update_or_create(
            task=task, config_id=config_id, defaults=fields
        )
    return push_config_to_proto(stored)


def push_config_create(
    *,
    agent: Agent,
    principal: Principal,
    config: TaskPushNotificationConfig,
    dialect: str,
    headers: dict[str, str] | None = None,
) -> TaskPushNotificationConfig:
    task = task_get_row(agent=agent, principal=principal, task_id=config.task_id)
    return push_config_set(task=task, config=config, dialect=dialect, headers=headers)


def push_config_delete(*, agent: Agent, principal: Principal, task_id: str, config_id: str) -> None:
    if not config_id:  # unlike a get, a delete never means "the first one"
        raise InvalidParamsError("Deleting a push notification config needs its 'id'.")
    # Idempotent (v1.0.1 3.1.10: "multiple deletions of the same config have the same
    # effect"): a config already gone is no error; a task the caller cannot see still is.
    task = task_get_row(agent=agent, principal=principal, task_id=task_id)
    PushConfig.objects.filter(task=task, config_id=config_id).delete()


# --- the outbox ----------------------------------------------------------------------------


def push_outbox_add(*, task: Task, event: TaskEvent) -> None:
    """Queue the event for every config of the task that hears its kind. Runs inside the
    transaction that wrote the event, so an event and its deliveries exist together."""
    configs = [
        c for c in PushConfig.objects.filter(task=task) if event.kind in (c.event_kinds or [])
    ]
    if not configs:
        return
    now = timezone.now()
    Delivery.objects.bulk_create(
        [Delivery(config=c, event=event, seq=event.seq, next_attempt_at=now) for c in configs]
    )
    config_pks = [c.pk for c in configs]

    def dispatch() -> None:
        from .tasks import push_deliver_task

        for pk in config_pks:
            push_deliver_task.delay(str(pk))

    transaction.on_commit(dispatch, robust=True)
