"""The errors of push notification configs: A2A's own classes (tasks_app.errors), with the
messages every binding answers."""

from __future__ import annotations

from tasks_app.errors import PushNotificationNotSupportedError, TaskNotFoundError


def push_not_offered(where: str = "") -> PushNotificationNotSupportedError:
    return PushNotificationNotSupportedError(
        f"{where}This agent does not offer push notifications "
        "(its card declares capabilities.pushNotifications=false)."
    )


def push_config_not_found(task_id: str, config_id: str) -> TaskNotFoundError:
    return TaskNotFoundError(
        f"Task {task_id!r} has no push notification config {config_id[:200]!r}."
    )
