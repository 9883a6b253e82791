"""Fixtures shared by the raw-HTTP end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest


@dataclass
class Target:
    """An agent under test: its JSON-RPC URL, a key of its tenant, and the row."""

    url: str
    key: str
    agent: Any


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client
