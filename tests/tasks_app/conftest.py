"""Fixtures of the task tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sends queue no agent run, so no worker (the session's live platform runs some) takes a
    test's task: it stays in the state the test leaves it in."""
    monkeypatch.setattr("tasks_app.services.enqueue_run", lambda *args: None)
