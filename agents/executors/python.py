"""The `python` executor: an installed AgentExecutor class, only from the operator's allowlist.

Tenants never upload code: they pick a dotted path that the operator listed in
A2A_PYTHON_EXECUTORS, and may pass keyword arguments to its constructor: plain ones in
`init_kwargs`, secret ones as the agent's executor secrets (encrypted at rest, never shown).
A name is given in one of the two only; the constructor gets both sets, and nothing else: what
it needs must come from one of them. Both are checked against the constructor's signature when
the agent is saved (`arguments_problems`), so a run never fails on an argument.
"""

from __future__ import annotations

import inspect
import keyword
from collections.abc import Collection, Mapping
from typing import Any

from a2a.server.agent_execution import AgentExecutor
from django.conf import settings
from django.utils.module_loading import import_string
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agents import limits


class PythonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    class_path: str = Field(
        min_length=1,
        max_length=limits.CLASS_PATH,
        description="Dotted path of an AgentExecutor subclass.",
    )
    init_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        max_length=limits.INIT_KWARGS,
        description="Keyword arguments for the constructor, stored and shown as plain JSON. "
        "Put API keys, tokens and other secrets in the agent's executor secrets instead "
        "(write-only, encrypted at rest): they are passed as keyword arguments too, and a "
        "name may be in one of the two only.",
    )

    @field_validator("init_kwargs")
    @classmethod
    def _keyword_names(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not name.isidentifier() or keyword.iskeyword(name):
                raise ValueError(f"{name[:80]!r} is not a Python keyword argument name")
            if len(name) > limits.INIT_KWARG_NAME:
                raise ValueError(
                    f"the name {name[:40]!r}… is longer than {limits.INIT_KWARG_NAME} characters"
                )
        return value

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


def arguments_problems(config: PythonConfig, names: Collection[str]) -> dict[str, str]:
    """What the class's constructor would refuse of `init_kwargs` and the secrets named
    `names`: keywords it does not take, and those it needs that neither gives. Keyed
    "init_kwargs", or "executor_secrets" for a secret it does not take; {} when it takes them.
    A constructor Python cannot describe (a C extension's) is not checked."""
    try:
        parameters = list(inspect.signature(import_string(config.class_path)).parameters.values())
    except (TypeError, ValueError):
        return {}
    by_keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    takes = sorted(p.name for p in parameters if p.kind in by_keyword)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    given = set(config.init_kwargs) | set(names)
    what = config.class_path
    takes_text = f"it takes {', '.join(takes)}" if takes else "it takes none"
    found: dict[str, list[str]] = {}
    if not takes_any:
        if unexpected := sorted(set(config.init_kwargs) - set(takes)):
            found.setdefault("init_kwargs", []).append(
                f"{what} takes no keyword argument {', '.join(unexpected)} ({takes_text})."
            )
        if unexpected := sorted(set(names) - set(takes)):
            found.setdefault("executor_secrets", []).append(
                f"{what} takes no keyword argument {', '.join(unexpected)}, and each secret "
                f"is passed as one ({takes_text})."
            )
    if missing := [
        p.name
        for p in parameters
        if p.kind in by_keyword and p.default is inspect.Parameter.empty and p.name not in given
    ]:
        found.setdefault("init_kwargs", []).append(
            f"{what} needs {', '.join(missing)}: give "
            f"{'it' if len(missing) == 1 else 'each'} in init_kwargs, or as a secret."
        )
    if positional := [
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is inspect.Parameter.empty
    ]:
        found.setdefault("init_kwargs", []).append(
            f"{what} needs positional arguments ({', '.join(positional)}), which no agent can "
            "give: the platform passes keyword arguments only."
        )
    return {key: " ".join(problems) for key, problems in found.items()}


def build(config: PythonConfig, secrets: Mapping[str, str]) -> AgentExecutor:
    executor_class = import_string(config.class_path)
    # A name in both would be a TypeError here; executors.executor_secrets_check says so first.
    return executor_class(**config.init_kwargs, **secrets)  # type: ignore[no-any-return]
