"""The `openai` executor: an agent backed by any OpenAI-compatible chat-completions endpoint.

(Built in the next step; the config, secrets and save-time checks are final.)
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a.server.agent_execution import AgentExecutor
from pydantic import BaseModel, ConfigDict, Field

from .outbound import url_problem

SECRET_NAMES = ("api_key",)


class OpenAIConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(
        description="The endpoint's base URL, up to and including its version, e.g. "
        "https://api.openai.com/v1 (requests go to <base_url>/chat/completions).",
        min_length=1,
        max_length=2000,
    )
    model: str = Field(
        description="The model to ask, e.g. gpt-4o-mini.", min_length=1, max_length=200
    )
    system_prompt: str = Field(
        default="", max_length=100_000, description="Sent first, as the system message."
    )
    temperature: float | None = Field(
        default=None, ge=0, le=2, description="Sampling temperature; empty: the endpoint's default."
    )
    max_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="At most this many tokens in a reply; empty: the endpoint's default.",
    )
    history_turns: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="How many earlier messages of the conversation (earlier tasks with the "
        "same contextId) are sent before this task's own.",
    )
    timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="Connecting, and waiting for each part of the reply, ends after this long.",
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Times a 429, a 5xx or a timeout is retried (with backoff) before the task "
        "fails; a 401 or 403 is never retried.",
    )


def save_check(config: OpenAIConfig) -> dict[str, str]:
    problem = url_problem(config.base_url, "base_url")
    return {"base_url": problem} if problem else {}


def build(config: OpenAIConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    raise NotImplementedError


async def connection_test(config: OpenAIConfig, secrets: Mapping[str, str]) -> str:
    raise NotImplementedError
