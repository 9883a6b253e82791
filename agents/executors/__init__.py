"""The executor registry: the one place an executor kind is added.

Each kind has a pydantic model that validates the agent's ``executor_config`` (unknown
keys are rejected, so a typo is reported instead of silently ignored) and a factory that
builds an ``a2a-sdk`` ``AgentExecutor`` from the validated config. A kind may also take the
agent's secrets (``secrets.py``: encrypted at rest, write-only), which its factory receives
decrypted beside the config: free names (``python``: its constructor's keyword arguments) or
the fixed names it lists (``openai``'s ``api_key``). A kind that calls out has a save-time check
(the SSRF guard resolves its URLs) and a "test connection".
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import AgentExecutor
from django.core.exceptions import ValidationError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from agents import limits
from agents.wording import problems

from . import a2a_proxy, conformance, echo, openai_chat, python, webhook
from .secrets import FIELD as SECRETS_FIELD
from .secrets import executor_secrets_open

CONFIG_FIELD = "executor_config"

if TYPE_CHECKING:
    from agents.models import Agent


@dataclass(frozen=True)
class ExecutorKind:
    name: str
    description: str
    config_model: type[BaseModel]
    # Called with the validated config, and with the secrets too if the kind takes them.
    factory: Callable[..., AgentExecutor]
    # For a kind that takes secrets: which of the given secret names its validated config
    # sets as well (a name comes from one place only). None: the kind takes no secrets.
    secret_clashes: Callable[[Any, Collection[str]], list[str]] | None = None
    # For a kind whose secrets have fixed names: those names (each optional unless the
    # kind's factory says otherwise). Empty: free names (secret_clashes) or none.
    secret_names: tuple[str, ...] = ()
    # For a kind whose config and secrets become a constructor's keyword arguments: what the
    # validated config and the secret names given would make that constructor refuse, as
    # {config key or SECRETS_FIELD: problem}; checked when the agent is saved.
    arguments_check: Callable[[Any, Collection[str]], dict[str, str]] | None = None
    # Checks at save time that the model cannot make (the SSRF guard resolves hosts, which
    # must not happen on a run's event loop): the validated config -> {field: problem}.
    save_check: Callable[[Any], dict[str, str]] | None = None
    # "Test connection": reaches the kind's outside service with the validated config, the
    # secrets and (keyword `agent_path`, "tenant/agent") the agent it is for, whose tenant's
    # key signs what a kind signs; one line saying what answered, or
    # outbound.ConnectionTestFailed.
    connection_test: Callable[..., Awaitable[str]] | None = None
    # The kind holds work outside the platform between runs (an upstream task, a tenant's
    # job): a task canceled while it waits for input, with no run under way, gets its
    # executor's cancel() too, run on a worker (tasks_app.execution.cancel_outside_run).
    cancels_outside_runs: bool = False

    @property
    def takes_secrets(self) -> bool:
        return self.secret_clashes is not None or bool(self.secret_names)


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
            python.secret_clashes,
            arguments_check=python.arguments_problems,
        ),
        ExecutorKind(
            "openai",
            "A model behind any OpenAI-compatible chat-completions endpoint.",
            openai_chat.OpenAIConfig,
            openai_chat.build,
            secret_names=openai_chat.SECRET_NAMES,
            save_check=openai_chat.save_check,
            connection_test=openai_chat.connection_test,
        ),
        ExecutorKind(
            "a2a-proxy",
            "A front for an A2A agent hosted elsewhere.",
            a2a_proxy.ProxyConfig,
            a2a_proxy.build,
            secret_names=a2a_proxy.SECRET_NAMES,
            save_check=a2a_proxy.save_check,
            connection_test=a2a_proxy.connection_test,
            cancels_outside_runs=True,
        ),
        ExecutorKind(
            "webhook",
            "A bridge to your own HTTP service.",
            webhook.WebhookConfig,
            webhook.build,
            secret_names=webhook.SECRET_NAMES,
            save_check=webhook.save_check,
            connection_test=webhook.connection_test,
            cancels_outside_runs=True,
        ),
    )
}


def executor_kind_choices() -> list[tuple[str, str]]:
    return [(name, f"{name}: {kind.description}") for name, kind in REGISTRY.items()]


def executor_config_validate(*, kind: str, config: Any) -> dict[str, Any]:
    """Validate an agent's executor config; return it normalised. Raises ValidationError keyed
    "executor_config", one message per problem, each naming the key it is about."""
    if kind not in REGISTRY:
        raise ValidationError(
            {"executor_kind": f"Unknown executor kind {kind!r}; choose one of {sorted(REGISTRY)}."}
        )
    if not isinstance(config, dict):
        raise ValidationError({CONFIG_FIELD: "The executor config must be a JSON object."})
    if problem := config_size_problem(config):
        raise ValidationError({CONFIG_FIELD: problem})
    model_class = REGISTRY[kind].config_model
    try:
        model = model_class.model_validate(config)
    except PydanticValidationError as exc:
        found = problems(exc, whole="The config", known=list(model_class.model_fields))
        raise ValidationError({CONFIG_FIELD: found}) from None
    return model.model_dump(mode="json")


def config_size_problem(config: Any) -> str | None:
    """Why a config is too large as a whole, or nested too deeply, for the platform to keep;
    None when it is not. Each kind's model bounds its own fields; this bounds what is free-form
    in them too (python's init_kwargs)."""
    stack: list[tuple[Any, int]] = [(config, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict | list) and depth > limits.JSON_DEPTH:
            return (
                f"The executor config is nested more than {limits.JSON_DEPTH} levels deep; "
                "give it a flatter shape."
            )
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
    try:
        size = len(json.dumps(config, ensure_ascii=False, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError):
        return (
            "The executor config must hold JSON values only (objects, lists, text, finite "
            "numbers, true, false, null)."
        )
    if size > limits.EXECUTOR_CONFIG_JSON:
        return (
            f"The executor config is {size:,} characters long as JSON; at most "
            f"{limits.EXECUTOR_CONFIG_JSON:,} are kept."
        )
    return None


def executor_secrets_check(*, kind: str, config: dict[str, Any], names: Collection[str]) -> None:
    """Check that an executor of this kind and (valid) config takes secrets of these names.
    Raises ValidationError keyed "executor_secrets"."""
    if not names or kind not in REGISTRY:
        return
    spec = REGISTRY[kind]
    if not spec.takes_secrets:
        raise ValidationError(
            {
                SECRETS_FIELD: f"The {kind} executor takes no secrets; clear them "
                f"({', '.join(sorted(names))})."
            }
        )
    if spec.secret_names:
        unknown = sorted(set(names) - set(spec.secret_names))
        if unknown:
            raise ValidationError(
                {
                    SECRETS_FIELD: f"The {kind} executor takes the secrets "
                    f"{', '.join(spec.secret_names)} only, not {', '.join(unknown)}."
                }
            )
        return
    assert spec.secret_clashes is not None
    clashes = spec.secret_clashes(spec.config_model.model_validate(config), names)
    if clashes:
        raise ValidationError(
            {
                SECRETS_FIELD: f"{', '.join(clashes)}: given both in the executor config and as "
                "a secret. Give each name once: secret values as secrets only."
            }
        )


def executor_arguments_check(*, kind: str, config: dict[str, Any], names: Collection[str]) -> None:
    """Check that what an agent of this kind and (valid) config would pass its executor's
    constructor, with secrets of these names, is what the constructor takes (python's
    init_kwargs against its class). Raises ValidationError: a problem with the config keyed
    "executor_config" ("init_kwargs: ..."), one with the secrets keyed "executor_secrets"."""
    spec = REGISTRY.get(kind)
    if spec is None or spec.arguments_check is None:
        return
    found = spec.arguments_check(spec.config_model.model_validate(config), names)
    errors: dict[str, list[str]] = {}
    for key, problem in found.items():
        if key == SECRETS_FIELD:
            errors.setdefault(SECRETS_FIELD, []).append(problem)
        else:
            errors.setdefault(CONFIG_FIELD, []).append(f"{key}: {problem}")
    if errors:
        raise ValidationError(dict(sorted(errors.items())))  # the config's first


def executor_build(
    *, kind: str, config: dict[str, Any], secrets: Mapping[str, str] | None = None
) -> AgentExecutor:
    """Build the executor for an agent. The config is validated again: it may predate a rule."""
    executor_config_validate(kind=kind, config=config)
    secrets = dict(secrets or {})
    executor_secrets_check(kind=kind, config=config, names=secrets)
    spec = REGISTRY[kind]
    model = spec.config_model.model_validate(config)
    if not spec.takes_secrets:
        return spec.factory(model)
    return spec.factory(model, secrets)


def executor_config_save_check(*, kind: str, config: dict[str, Any]) -> None:
    """The checks of a (valid) config that run when an agent is saved, not at each run: the
    SSRF guard on its URLs. Blocking (it resolves host names). Raises ValidationError keyed
    "executor_config", each problem naming its field."""
    spec = REGISTRY[kind]
    if spec.save_check is None:
        return
    found = spec.save_check(spec.config_model.model_validate(config))
    if found:
        raise ValidationError(
            {CONFIG_FIELD: [f"{field}: {problem}" for field, problem in found.items()]}
        )


async def executor_connection_test(
    *, kind: str, config: dict[str, Any], secrets: Mapping[str, str], agent_path: str
) -> str:
    """Reach the outside service of an agent of this kind (config valid, secrets checked) for
    the agent `agent_path` ("tenant/agent", which need not be saved yet): one line of what
    answered. Raises outbound.ConnectionTestFailed, or LookupError for a kind that has nothing
    to reach."""
    spec = REGISTRY[kind]
    if spec.connection_test is None:
        raise LookupError(f"The {kind} executor reaches no outside service.")
    model = spec.config_model.model_validate(config)
    return await spec.connection_test(model, dict(secrets), agent_path=agent_path)


def agent_executor_build(*, agent: Agent) -> AgentExecutor:
    """Build an agent's executor from its config and its secrets, decrypted only here.
    Raises agents.crypto.DecryptionFailed when no configured key opens the secrets."""
    return executor_build(
        kind=agent.executor_kind,
        config=agent.executor_config,
        secrets=executor_secrets_open(agent.executor_secrets_encrypted),
    )
