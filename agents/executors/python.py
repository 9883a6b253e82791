"""The `python` executor: an installed AgentExecutor class, only from the operator's allowlist.

Tenants never upload code: they pick a dotted path that the operator listed in
A2A_PYTHON_EXECUTORS, and may pass keyword arguments to its constructor: plain ones in
`init_kwargs`, secret ones as the agent's executor secrets (encrypted at rest, never shown).
A name is given in one of the two only; the constructor gets both sets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from a2a.server.agent_execution import AgentExecutor
from django.conf import settings
from django.utils.module_loading import import_string
from pydantic import BaseModel, ConfigDict, Field, field_validator


class PythonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    class_path: str = Field(description="Dotted path of an AgentExecutor subclass.")
    init_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for the constructor, stored and shown as plain JSON. "
        "Put API keys, tokens and other secrets in the agent's executor secrets instead "
        "(write-only, encrypted at rest): they are passed as keyword arguments too, and a "
        "name may be in one of the two only.",
    )

    @field_validator("class_path")
    @classmethod
    def _allowlisted(cls, value: str) -> str:
        allowed = list(settings.A2A_PYTHON_EXECUTORS)
        if value not in allowed:
            raise ValueError(
                f"{value!r} is not in the operator's allowlist A2A_PYTHON_EXECUTORS "
                f"({', '.join(allowed) or 'empty'})"
            )
        try:
            target = import_string(value)
        except ImportError as exc:
            raise ValueError(f"{value!r} cannot be imported: {exc}") from exc
        if not (isinstance(target, type) and issubclass(target, AgentExecutor)):
            raise ValueError(f"{value!r} is not an a2a-sdk AgentExecutor subclass")
        return value


def secret_clashes(config: PythonConfig, names: Collection[str]) -> list[str]:
    """The secret names that init_kwargs sets too."""
    return sorted(set(config.init_kwargs) & set(names))


def build(config: PythonConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    executor_class = import_string(config.class_path)
    # A name in both would be a TypeError here; executors.executor_secrets_check says so first.
    return executor_class(**config.init_kwargs, **secrets)  # type: ignore[no-any-return]
