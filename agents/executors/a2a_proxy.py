"""The `a2a-proxy` executor: a front for an A2A agent hosted elsewhere.

(Built in the next step; the config, secrets and save-time checks are final.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from a2a.server.agent_execution import AgentExecutor
from pydantic import BaseModel, ConfigDict, Field

from .outbound import url_problem

# `token` goes as "Authorization: Bearer <token>"; `api_key` in the header api_key_header names.
SECRET_NAMES = ("token", "api_key")


class ProxyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    card_url: str = Field(
        description="The upstream agent's card, e.g. "
        "https://agents.example.com/.well-known/agent-card.json.",
        min_length=1,
        max_length=2000,
    )
    binding: Literal["auto", "JSONRPC", "HTTP+JSON", "GRPC"] = Field(
        default="auto",
        description="The upstream binding to use: auto takes the card's preferred one; another "
        "is used when the card offers it, else the card's preferred one.",
    )
    api_key_header: str = Field(
        default="X-API-Key",
        pattern=r"^[A-Za-z0-9-]{1,100}$",
        description="The header that carries the api_key secret (the token secret goes as "
        "Authorization: Bearer).",
    )
    streaming: bool = Field(
        default=True, description="Stream from the upstream when its card says it can."
    )
    timeout_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="Connecting, and waiting for each upstream event, ends after this long.",
    )


def save_check(config: ProxyConfig) -> dict[str, str]:
    problem = url_problem(config.card_url, "card_url")
    return {"card_url": problem} if problem else {}


def build(config: ProxyConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    raise NotImplementedError


async def connection_test(config: ProxyConfig, secrets: Mapping[str, str]) -> str:
    raise NotImplementedError
