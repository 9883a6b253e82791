"""What a task needs from push notifications, handed over by push_app when Django starts
(push_app.apps), so that tasks_app imports nothing of push_app and the dependency runs one way:
push_app builds on tasks. A process without push_app installed fails loudly on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured


@dataclass(frozen=True)
class PushSeam:
    # A push URL a send carries inline passes the SSRF guard (raises InvalidParams if not).
    url_validate: Callable[[str], None]
    # Store a send's inline config on its task: (task=, config=, dialect=, checked=, headers=).
    config_set: Callable[..., Any]
    # Queue an event for the task's configs, in the transaction that wrote it: (task=, event=).
    outbox_add: Callable[..., None]


_seam: PushSeam | None = None


def push_seam_register(seam: PushSeam) -> None:
    global _seam
    _seam = seam


def push_seam() -> PushSeam:
    if _seam is None:
        raise ImproperlyConfigured("push_app is not in INSTALLED_APPS: tasks cannot push.")
    return _seam
