"""The `webhook` executor: a bridge to the tenant's own HTTP service.

(Built in the next step; the config, secrets and save-time checks are final.)
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a.server.agent_execution import AgentExecutor
from pydantic import BaseModel, ConfigDict, Field

from .outbound import url_problem

# `token` goes as "Authorization: Bearer <token>" beside the X-A2A-Signature JWT.
SECRET_NAMES = ("token",)


class WebhookConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        description="Your service's URL; each run is POSTed to it.", min_length=1, max_length=2000
    )
    timeout_seconds: float = Field(
        default=30,
        gt=0,
        le=600,
        description="How long the POST may take to answer (a 202 answers at once).",
    )
    callback_timeout_seconds: float = Field(
        default=3600,
        gt=0,
        le=7 * 24 * 3600,
        description="After a 202, how long the run waits for your service to post its final "
        "state before the task fails.",
    )


def save_check(config: WebhookConfig) -> dict[str, str]:
    problem = url_problem(config.url, "url")
    return {"url": problem} if problem else {}


def build(config: WebhookConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    raise NotImplementedError


async def connection_test(config: WebhookConfig, secrets: Mapping[str, str]) -> str:
    raise NotImplementedError
