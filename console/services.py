"""Writes the console's pages make beyond one call to an app's service: each owns its
transaction (an agent's fields with its secrets, an account with its membership, a key's
revocation, the record of an action on a task), or, for a job, the broker's answer within a
deadline. Changes to the watched models are recorded in the audit log where they are saved
(audit.capture); the actions on tasks and jobs, which change no watched model, here."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from a2a_platform.celery import app
from a2a_platform.queues import within
from agents.models import Agent, ApiKey, Tenant
from agents.services import ActionRefused, agent_secrets_set, agent_update, membership_add
from audit.services import event_record
from tasks_app.models import Task

from .selectors import BROKER_DEADLINE_SECONDS


@transaction.atomic
def agent_change(
    *, agent: Agent, fields: Iterable[str], executor_secrets: Mapping[str, str] | None
) -> Agent:
    """Save the agent's changed fields and, unless None (kept as they are), its executor
    secrets ({} clears them): the fields and the secrets together, or neither."""
    agent_update(agent=agent, fields=fields)
    if executor_secrets is not None:
        agent_secrets_set(agent=agent, secrets=executor_secrets)
    return agent


@transaction.atomic
def api_key_revoke(*, agent: Agent, prefix: str) -> ApiKey | None:
    """Revoke the tenant's active key `prefix` if it works for `agent` (a tenant-wide key, or
    the agent's own); None, and nothing done, when there is no such key."""
    key = (
        ApiKey.objects.select_for_update()
        .filter(tenant_id=agent.tenant_id, prefix=prefix, revoked_at__isnull=True)
        .first()
    )
    if key is None or key.agent_id not in (None, agent.pk):
        return None
    key.revoked_at = timezone.now()
    key.save(update_fields=["revoked_at"])
    return key


@transaction.atomic
def membership_add_by_username(
    *, tenant: Tenant, username: str, email: str, role: str
) -> tuple[Any, bool]:
    """Add the account `username` to the tenant with `role`, making it first (with no usable
    password yet, and `email`) when there is none; returns the account and whether it was
    made. ActionRefused says why not; IntegrityError when the same account was made a moment
    ago by another request. Matched by user name only: an email is whatever an account's maker
    typed, so it says nothing about who holds the account."""
    User: Any = get_user_model()
    user = User.objects.filter(username=username).first()
    created = user is None
    if created:
        user = _account_new(User, username=username, email=email)
    elif not user.is_active:
        raise ActionRefused(
            f"The account {username} is disabled; an operator can enable it in the admin."
        )
    membership_add(tenant=tenant, user=user, role=role)
    return user, created


def _account_new(User: Any, *, username: str, email: str) -> Any:
    """An account with no usable password yet, its name checked as Django's forms check it."""
    try:
        User.username_validator(username)
    except ValidationError as exc:
        problem = " ".join(exc.messages)
        raise ActionRefused(f"{username!r} cannot be a user name: {problem}") from None
    return User.objects.create_user(username=username, email=email)


def job_revoke(*, job_id: str, deadline: float = BROKER_DEADLINE_SECONDS) -> None:
    """Revoke a Celery job by id on every live worker: one that has not started is skipped when
    its turn comes; one already running finishes (thread pools cannot stop a job midway).
    Raises what the broker raised, or TimeoutError past `deadline` seconds. Recorded in the
    audit log once the broker took it."""
    within(deadline, lambda: app.control.revoke(job_id))
    event_record(tenant_id=None, action="revoke", object_type="job", object_id=job_id)


# --- what a person did to a task from the console -------------------------------------------

TaskAction = Literal["cancel", "reply", "try"]
# How much of a sent message its record keeps: enough to say what was sent; the message itself
# is in the task's history.
SENT_TEXT_KEPT = 200


# The audit log's name of each action.
AUDIT_ACTIONS: dict[TaskAction, str] = {"cancel": "cancel", "reply": "reply", "try": "send"}


def task_content_type() -> ContentType:
    """The content type of tasks, read from the database each time rather than from
    ContentType's cache, which lives as long as the process: a long-lived web process must not
    write an id that is no longer the database's (a database restored from elsewhere, or the
    test suite's flushes between tests, renumber the rows)."""
    return ContentType.objects.get(app_label=Task._meta.app_label, model=Task._meta.model_name)


def _excerpt(text: str) -> str:
    line = re.sub(r"\s+", " ", text).strip()
    return line if len(line) <= SENT_TEXT_KEPT else line[: SENT_TEXT_KEPT - 1] + "…"


@transaction.atomic
def task_action_record(
    *,
    user: Any,
    task_id: uuid.UUID,
    action: TaskAction,
    role: str,
    message_id: str = "",
    text: str = "",
) -> LogEntry:
    """Record that `user`, acting as `role` (operator, owner or member), canceled the task,
    replied to it, or started it from Try it: a row of Django's admin log, so the admin's
    history of the task shows it beside the task page, and an event of the tenant's audit log
    (the message's id, not its text). A Try-it send made the task (ADDITION); the others
    changed it (CHANGE)."""
    tenant_id = Task.objects.values_list("tenant_id", flat=True).get(pk=task_id)
    event_record(
        tenant_id=tenant_id,
        action=AUDIT_ACTIONS[action],
        object_type="task",
        object_id=str(task_id),
        object_label=f"Task {task_id} (as {role})",
        changes={"message_id": [None, message_id]} if message_id else {},
    )
    if action == "cancel":
        what = f"Canceled the task (as {role})."
    else:
        how = "Replied" if action == "reply" else "Sent from Try it"
        what = f"{how} (as {role}), message {message_id}: “{_excerpt(text)}”"
    return LogEntry.objects.create(
        user_id=user.pk,
        content_type=task_content_type(),
        object_id=str(task_id),
        object_repr=f"Task {task_id}",
        action_flag=ADDITION if action == "try" else CHANGE,
        change_message=what,
    )
