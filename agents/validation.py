"""Validation of an agent's registration: executor config, skills and modes, within the bounds
of agents.limits."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Annotated, Any

from a2a.types import AgentSkill
from django.core.exceptions import ValidationError
from google.protobuf.json_format import ParseDict, ParseError
from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field, StringConstraints
from pydantic import ValidationError as PydanticValidationError

from a2a_platform.text import unstorable_text

from . import limits
from .crypto import DecryptionFailed
from .executors import (
    executor_arguments_check,
    executor_config_save_check,
    executor_config_validate,
    executor_secrets_check,
)
from .executors.secrets import FIELD as SECRETS_FIELD
from .executors.secrets import executor_secret_names
from .models import Agent, ApiKey
from .wording import problem_text, problems

# The form field that clears an agent's secrets (agents.forms.AgentSecretsFormMixin); the one
# that sets them is SECRETS_FIELD, under which every secrets error is reported.
SECRETS_CLEAR_FIELD = "executor_secrets_clear"


def agent_validate(agent: Agent, *, secret_names: Collection[str] | None = None) -> None:
    """Normalise and check the fields Django cannot check alone. Raises ValidationError.

    The executor config is checked against the secrets the agent will have: `secret_names`,
    or by default the ones it has stored (a python executor's constructor must take them and
    its init_kwargs); the URLs it names pass the SSRF guard (which resolves them: blocking)."""
    agent_fields_check(agent)
    executor_config_save_check(kind=agent.executor_kind, config=agent.executor_config)
    errors: dict[str, list[str]] = {}
    if secret_names is None:
        try:
            secret_names = executor_secret_names(agent.executor_secrets_encrypted)
        except DecryptionFailed as exc:
            errors[SECRETS_FIELD] = [f"{exc} Set the secrets again, or clear them."]
            secret_names = ()
    for check in (executor_secrets_check, executor_arguments_check):
        try:
            check(kind=agent.executor_kind, config=agent.executor_config, names=secret_names)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


def agent_fields_check(agent: Agent) -> None:
    """The checks of an agent's JSON fields that need nothing outside it (no host name is
    resolved, no secret read): the executor config against its kind's model, normalised in
    place; skills and media types within agents.limits. Raises ValidationError, every field's
    problems at once."""
    errors: dict[str, list[str]] = {}
    for field in JSON_FIELDS:
        if problem := unstorable_text(getattr(agent, field)):
            errors[field] = [f"Text here {problem}."]
    if "executor_config" not in errors:
        try:
            agent.executor_config = executor_config_validate(
                kind=agent.executor_kind, config=agent.executor_config
            )
        except ValidationError as exc:
            errors.update(exc.message_dict)
    for field in ("skills", "extended_skills"):
        if field not in errors and (found := skills_problems(getattr(agent, field))):
            errors[field] = found
    for field in ("default_input_modes", "default_output_modes"):
        if field not in errors and (found := modes_problems(getattr(agent, field))):
            errors[field] = found
    if errors:
        raise ValidationError(errors)


JSON_FIELDS = (
    "executor_config",
    "skills",
    "extended_skills",
    "default_input_modes",
    "default_output_modes",
)


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


# --- skills and media types ------------------------------------------------------------------


def _media_type(value: str) -> str:
    kind, slash, subtype = value.partition("/")
    if not (slash and kind.strip() and subtype.strip()) or value != value.strip():
        raise ValueError(f"{value[:60]!r} is not a media type such as text/plain")
    return value


MediaType = Annotated[str, StringConstraints(max_length=limits.MODE), AfterValidator(_media_type)]
MediaTypes = Annotated[list[MediaType], Field(max_length=limits.MODES)]


class _Modes(BaseModel):
    model_config = ConfigDict(strict=True)

    modes: MediaTypes


class _Scopes(BaseModel):
    """A StringList in proto-JSON: {"list": [...]}."""

    model_config = ConfigDict(extra="forbid", strict=True)

    list_: Annotated[
        list[Annotated[str, StringConstraints(max_length=limits.SKILL_SCOPE)]],
        Field(max_length=limits.SKILL_SCOPES, alias="list"),
    ] = []


class _SecurityRequirement(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    schemes: Annotated[
        dict[Annotated[str, StringConstraints(max_length=limits.SKILL_SCHEME_NAME)], _Scopes],
        Field(max_length=limits.SKILL_SCHEMES),
    ] = {}


class SkillInput(BaseModel):
    """An AgentSkill as a tenant writes it (proto-JSON, either spelling of each name), within
    the platform's bounds."""

    model_config = ConfigDict(extra="forbid", strict=True)

    id: Annotated[str, StringConstraints(min_length=1, max_length=limits.SKILL_ID)]
    name: Annotated[str, StringConstraints(min_length=1, max_length=limits.SKILL_NAME)]
    description: Annotated[
        str, StringConstraints(min_length=1, max_length=limits.SKILL_DESCRIPTION)
    ]
    # REQUIRED by the spec, as id, name and description are: a card with a skill without tags
    # is one the SDK logs as not spec-compliant each time it serves it.
    tags: Annotated[
        list[Annotated[str, StringConstraints(min_length=1, max_length=limits.SKILL_TAG)]],
        Field(min_length=1, max_length=limits.SKILL_TAGS),
    ]
    examples: Annotated[
        list[Annotated[str, StringConstraints(max_length=limits.SKILL_EXAMPLE)]],
        Field(max_length=limits.SKILL_EXAMPLES),
    ] = []
    input_modes: MediaTypes = Field(
        default=[], validation_alias=AliasChoices("inputModes", "input_modes")
    )
    output_modes: MediaTypes = Field(
        default=[], validation_alias=AliasChoices("outputModes", "output_modes")
    )
    security_requirements: Annotated[
        list[_SecurityRequirement], Field(max_length=limits.SKILL_SECURITY_REQUIREMENTS)
    ] = Field(
        default=[],
        validation_alias=AliasChoices("securityRequirements", "security_requirements"),
    )


SKILL_FIELDS = (
    "id",
    "name",
    "description",
    "tags",
    "examples",
    "inputModes",
    "outputModes",
    "securityRequirements",
)


def skills_problems(skills: Any) -> list[str]:
    """What keeps `skills` from being a card's skills within the bounds; [] when nothing."""
    if not isinstance(skills, list):
        return ["Skills must be a JSON list of AgentSkill objects."]
    if len(skills) > limits.SKILLS:
        return [f"At most {limits.SKILLS} skills per list (this one has {len(skills)})."]
    found: list[str] = []
    seen: set[str] = set()
    for number, skill in enumerate(skills, start=1):
        if not isinstance(skill, dict):
            found.append(f"Skill #{number} must be a JSON object.")
            continue
        try:
            parsed = SkillInput.model_validate(skill)
        except PydanticValidationError as exc:
            found.extend(problems(exc, prefix=f"Skill #{number}:", known=SKILL_FIELDS))
            continue
        try:  # the card's own reading of it; within the model above it always succeeds
            ParseDict(skill, AgentSkill())
        except ParseError as exc:
            found.append(f"Skill #{number} is not an AgentSkill: {str(exc)[:200]}")
            continue
        if parsed.id in seen:
            found.append(f"Skill #{number}: the id {parsed.id!r} is used by an earlier skill.")
        seen.add(parsed.id)
    if not found:
        size = len(json.dumps(skills, ensure_ascii=False, separators=(",", ":")))
        if size > limits.SKILLS_JSON:
            found.append(
                f"The skills are {size:,} characters long as JSON; at most "
                f"{limits.SKILLS_JSON:,} together (shorten descriptions or examples)."
            )
    return found


def modes_problems(modes: Any) -> list[str]:
    """What keeps `modes` from being a list of media types within the bounds."""
    if not isinstance(modes, list):
        return ['Give a JSON list of media types, e.g. ["text/plain"].']
    try:
        _Modes.model_validate({"modes": modes})
    except PydanticValidationError as exc:
        return [
            problem_text(error, f"Media type #{error['loc'][1] + 1}")  # type: ignore[operator]
            if len(error["loc"]) > 1
            else problem_text(error, "The list")
            for error in exc.errors()
        ]
    return []
