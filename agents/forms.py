"""Form pieces for editing an agent, shared by the admin and the console: the write-only
executor secrets field.

A form for an agent adds the secrets with `AgentSecretsFormMixin` (before its ModelForm base).
`agents.validation.agent_form_check` then checks the config against the secrets the agent will
have, and the form's `save()` stores them through `agents.services.agent_secrets_set`. No page
ever shows a secret: the field renders empty, also when the form comes back with errors, and
`executor_secrets_status` gives the names only.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from .crypto import DecryptionFailed
from .executors.secrets import FIELD as SECRETS_FIELD
from .executors.secrets import executor_secret_names, executor_secrets_validate
from .models import Agent
from .services import agent_secrets_set
from .validation import SECRETS_CLEAR_FIELD

SECRETS_HELP = (
    "Write-only: a JSON object of name → secret string, e.g. "
    '{"api_key": "…"}, given to a python executor\'s constructor as keyword arguments beside '
    "init_kwargs (a name may be in one of the two only). Stored encrypted; never shown again. "
    "Leave empty to keep the current secrets; a new object replaces them all."
)


class SecretTextarea(forms.Textarea):
    """A textarea that never renders a value, not even what was just typed into a form that
    comes back with errors."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, None, attrs)
        context["widget"]["value"] = None
        return context


class ExecutorSecretsField(forms.Field):
    """A JSON object of name -> secret. Empty means "keep the current secrets" (None); else the
    checked secrets as a dict, which replace the current ones. Errors never quote a value."""

    widget = SecretTextarea(attrs={"rows": 3, "class": "mono", "autocomplete": "off"})

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Executor secrets")
        kwargs.setdefault("help_text", SECRETS_HELP)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, str] | None:
        if value is None or not str(value).strip():
            return None
        try:
            data = json.loads(value)
        except json.JSONDecodeError:
            # The decoder's message may quote the text: say only where it went wrong.
            raise ValidationError(
                'Not valid JSON: give an object of name → secret, e.g. {"api_key": "…"}.'
            ) from None
        try:
            return executor_secrets_validate(data)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict[SECRETS_FIELD]) from None

    def has_changed(self, initial: Any, data: Any) -> bool:
        return bool(data and str(data).strip())


def executor_secrets_status(agent: Agent) -> str:
    """What pages may show of an agent's secrets: "Not set", or "Set: " and their names."""
    if not agent.executor_secrets_encrypted:
        return "Not set"
    try:
        names = executor_secret_names(agent.executor_secrets_encrypted)
    except DecryptionFailed:
        return "Set, but no configured encryption key opens them: set them again or clear them"
    return "Set: " + ", ".join(names)


class AgentSecretsFormMixin(forms.Form):
    """The executor secrets of an agent ModelForm: `class F(AgentSecretsFormMixin,
    forms.ModelForm)`. Its clean() must call `agents.validation.agent_form_check`, which
    checks the config against the secrets given here (or those kept)."""

    executor_secrets = ExecutorSecretsField()
    executor_secrets_clear = forms.BooleanField(
        required=False,
        label="Clear the executor secrets",
        help_text="Remove every secret of this agent.",
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get(SECRETS_CLEAR_FIELD) and cleaned.get(SECRETS_FIELD) is not None:
            self.add_error(SECRETS_FIELD, "Give new secrets or clear them, not both.")
        return cleaned

    def save_executor_secrets(self, agent: Agent) -> None:
        """Store what the form says of the secrets (after the agent is saved; in its
        transaction): new ones replace the old, a tick clears them, nothing keeps them."""
        if self.cleaned_data.get(SECRETS_CLEAR_FIELD):
            agent_secrets_set(agent=agent, secrets={})
        elif self.cleaned_data.get(SECRETS_FIELD) is not None:
            agent_secrets_set(agent=agent, secrets=self.cleaned_data[SECRETS_FIELD])

    def save(self, commit: bool = True) -> Any:
        agent = super().save(commit=commit)  # type: ignore[misc]
        if commit:
            self.save_executor_secrets(agent)
        return agent
