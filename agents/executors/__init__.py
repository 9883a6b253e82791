"""The executor registry: the one place an executor kind is added.

Each kind has a pydantic model that validates the agent's ``executor_config`` (unknown
keys are rejected, so a typo is reported instead of silently ignored) and a factory that
builds an ``a2a-sdk`` ``AgentExecutor`` from the validated config.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution import AgentExecutor
from django.core.exceptions import ValidationError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from . import conformance, echo, python


@dataclass(frozen=True)
class ExecutorKind:
    name: str
    description: str
    config_model: type[BaseModel]
    factory: Callable[[Any], AgentExecutor]


REGISTRY: dict[str, ExecutorKind] = {
    kind.name: kind
    for kind in (
        ExecutorKind(
            "echo",
            "Echoes the user's text back as an artifact (demo).",
            echo.EchoConfig,
            echo.EchoExecutor,
        ),
        ExecutorKind(
            "conformance",
            "Answers the A2A TCK's scenarios by messageId prefix.",
            conformance.ConformanceConfig,
            conformance.ConformanceExecutor,
        ),
        ExecutorKind(
            "python",
            "An installed AgentExecutor class from the operator's allowlist.",
            python.PythonConfig,
            python.build,
        ),
    )
}


def executor_kind_choices() -> list[tuple[str, str]]:
    return [(name, f"{name}: {kind.description}") for name, kind in REGISTRY.items()]


def executor_config_validate(*, kind: str, config: Any) -> dict[str, Any]:
    """Validate an agent's executor config; return it normalised. Raises ValidationError."""
    if kind not in REGISTRY:
        raise ValidationError(
            {"executor_kind": f"Unknown executor kind {kind!r}; choose one of {sorted(REGISTRY)}."}
        )
    if not isinstance(config, dict):
        raise ValidationError({"executor_config": "The executor config must be a JSON object."})
    try:
        model = REGISTRY[kind].config_model.model_validate(config)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(config)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise ValidationError({"executor_config": f"Invalid {kind} config: {problems}"}) from exc
    return model.model_dump(mode="json")


def executor_build(*, kind: str, config: dict[str, Any]) -> AgentExecutor:
    """Build the executor for an agent. The config is validated again: it may predate a rule."""
    executor_config_validate(kind=kind, config=config)
    spec = REGISTRY[kind]
    return spec.factory(spec.config_model.model_validate(config))
