"""Validation of an agent's registration: executor config, skills and modes."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from a2a.types import AgentSkill
from django.core.exceptions import ValidationError
from google.protobuf.json_format import ParseDict, ParseError

from .crypto import DecryptionFailed
from .executors import (
    executor_config_save_check,
    executor_config_validate,
    executor_secrets_check,
)
from .executors.secrets import FIELD as SECRETS_FIELD
from .executors.secrets import executor_secret_names
from .models import Agent, ApiKey

# The form field that clears an agent's secrets (agents.forms.AgentSecretsFormMixin); the one
# that sets them is SECRETS_FIELD, under which every secrets error is reported.
SECRETS_CLEAR_FIELD = "executor_secrets_clear"


def agent_validate(agent: Agent, *, secret_names: Collection[str] | None = None) -> None:
    """Normalise and check the fields Django cannot check alone. Raises ValidationError.

    The executor config is checked against the secrets the agent will have: `secret_names`,
    or by default the ones it has stored; the URLs it names pass the SSRF guard (which
    resolves them: blocking)."""
    agent.executor_config = executor_config_validate(
        kind=agent.executor_kind, config=agent.executor_config
    )
    executor_config_save_check(kind=agent.executor_kind, config=agent.executor_config)
    errors: dict[str, str] = {}
    if secret_names is None:
        try:
            secret_names = executor_secret_names(agent.executor_secrets_encrypted)
        except DecryptionFailed as exc:
            errors[SECRETS_FIELD] = f"{exc} Set the secrets again, or clear them."
            secret_names = ()
    try:
        executor_secrets_check(
            kind=agent.executor_kind, config=agent.executor_config, names=secret_names
        )
    except ValidationError as exc:
        errors[SECRETS_FIELD] = " ".join(exc.message_dict[SECRETS_FIELD])
    for field in ("skills", "extended_skills"):
        problem = _skills_problem(getattr(agent, field))
        if problem:
            errors[field] = problem
    for field in ("default_input_modes", "default_output_modes"):
        value = getattr(agent, field)
        if not isinstance(value, list) or not all(isinstance(m, str) and "/" in m for m in value):
            errors[field] = 'Give a list of media types, e.g. ["text/plain"].'
    if errors:
        raise ValidationError(errors)


def agent_form_check(form: Any, cleaned: dict[str, Any], fields: Iterable[str]) -> None:
    """For a form that edits an agent (the admin's, the console's): check the executor config,
    skills and modes in `cleaned` as they would be saved, add each error to its field, and put
    the normalised values back into `cleaned`. A field left empty counts as {} or [].

    The config is checked against the secrets the agent will have: those the form sets or
    clears (agents.forms.AgentSecretsFormMixin), else those its instance has stored."""
    if not cleaned.get("executor_kind"):
        return  # the form already says the kind is missing or unknown
    fields = list(fields)
    instance = getattr(form, "instance", None)
    probe = Agent(
        executor_kind=cleaned["executor_kind"],
        executor_secrets_encrypted=getattr(instance, "executor_secrets_encrypted", ""),
    )
    for name in fields:
        value = cleaned.get(name)
        if value is None:
            value = {} if name == "executor_config" else []
        setattr(probe, name, value)
    try:
        agent_validate(probe, secret_names=_secret_names_set_by(cleaned))
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        for name in fields:
            cleaned[name] = getattr(probe, name)


def _secret_names_set_by(cleaned: dict[str, Any]) -> list[str] | None:
    """The secret names a form's cleaned data gives the agent; None if it keeps its own."""
    if cleaned.get(SECRETS_CLEAR_FIELD):
        return []
    secrets = cleaned.get(SECRETS_FIELD)
    return sorted(secrets) if isinstance(secrets, dict) else None


def validation_summary(exc: ValidationError) -> str:
    """One line naming each field and its problems, for the shell."""
    return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())


def api_key_scopes_validate(scopes: Any) -> None:
    known = {choice for choice, _ in ApiKey.SCOPE_CHOICES}
    if not isinstance(scopes, list) or not set(scopes) <= known:
        raise ValidationError({"scopes": f"Scopes must be a list drawn from {sorted(known)}."})


def _skills_problem(skills: Any) -> str | None:
    if not isinstance(skills, list):
        return "Skills must be a JSON list of AgentSkill objects."
    seen: set[str] = set()
    for index, skill in enumerate(skills):
        if not isinstance(skill, dict):
            return f"Skill #{index} must be an object."
        try:
            parsed = ParseDict(skill, AgentSkill())
        except ParseError as exc:
            return f"Skill #{index} is not a valid AgentSkill: {exc}"
        for required in ("id", "name", "description"):
            if not getattr(parsed, required):
                return f"Skill #{index} needs a non-empty {required!r}."
        if parsed.id in seen:
            return f"Skill id {parsed.id!r} appears twice."
        seen.add(parsed.id)
    return None
