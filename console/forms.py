"""Forms of the console: agent registration and editing (each executor kind's fields, checked by
its config model; secrets write-only; the A2A versions served, one checkbox each), API keys, and
the people of a tenant."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model

from agents.executors import executor_kind_choices
from agents.forms import AgentKindFormMixin, JSONInputField, ProtocolVersionsField
from agents.models import DEFAULT_MODES, Agent, ApiKey, Membership

_JSON_FIELDS = ("executor_config", "skills", "default_input_modes", "default_output_modes")


class AgentRegistrationForm(AgentKindFormMixin, forms.ModelForm):
    """An agent's registration. The executor config comes from the chosen kind's group of
    fields; the page does not show it as JSON, but a script may still post the whole object as
    `executor_config` (agents.forms)."""

    executor_kind = forms.ChoiceField(
        choices=executor_kind_choices,
        help_text="What runs the agent: a built-in kind, or a Python AgentExecutor the operator "
        "allows.",
    )

    class Meta:
        model = Agent
        fields = (
            "slug",
            "name",
            "description",
            "version",
            "executor_kind",
            "executor_config",
            "skills",
            "default_input_modes",
            "default_output_modes",
            "visibility",
            "anonymous_scope",
            "push_notifications",
            "protocol_versions",
            "deduplicate_messages",
            "custom_domain",
            "worker_loss",
            "worker_loss_attempts",
        )
        help_texts = {
            "slug": "The agent's name in its URLs: /a2a/<tenant>/<slug>/.",
            "skills": 'JSON list of AgentSkill objects: [{"id": ..., "name": ..., '
            '"description": ..., "tags": [...]}]; empty: the card lists one skill made of the '
            "agent's name and description.",
            "default_input_modes": 'JSON list of media types, e.g. ["text/plain"].',
            "default_output_modes": 'JSON list of media types, e.g. ["text/plain"].',
        }
        field_classes = {
            **{name: JSONInputField for name in _JSON_FIELDS},
            "protocol_versions": ProtocolVersionsField,
        }
        widgets = {
            "description": forms.Textarea(attrs={"rows": 3}),
            "skills": forms.Textarea(attrs={"rows": 3, "class": "mono"}),
            "default_input_modes": forms.TextInput(attrs={"class": "mono"}),
            "default_output_modes": forms.TextInput(attrs={"class": "mono"}),
        }

    def __init__(self, *args: Any, tenant: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance.tenant = tenant
        for name in _JSON_FIELDS:
            self.fields[name].required = False
        # `python` needs a class the operator allowed: with none allowed it is not offered
        # (an agent that already is one keeps its kind).
        if not settings.A2A_PYTHON_EXECUTORS and self.instance.executor_kind != "python":
            self.fields["executor_kind"].choices = [
                c for c in self.fields["executor_kind"].choices if c[0] != "python"
            ]
            self.kind_not_offered(
                "python",
                "Not offered here: the operator has allowed no Python executor classes "
                "(A2A_PYTHON_EXECUTORS).",
            )
        self.initial.setdefault("skills", [])
        self.initial.setdefault("default_input_modes", list(DEFAULT_MODES))
        self.initial.setdefault("default_output_modes", list(DEFAULT_MODES))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.agent_kind_check(cleaned, _JSON_FIELDS)
        slug = cleaned.get("slug")
        if slug and Agent.objects.filter(tenant=self.instance.tenant, slug=slug).exists():
            self.add_error("slug", f"Tenant {self.instance.tenant.slug!r} has an agent {slug!r}.")
        return cleaned

    def agent_fields(self) -> dict[str, Any]:
        """The registration's fields as checked, for agents.services.agent_create."""
        return {name: getattr(self.instance, name) for name in self._meta.fields}


class AgentEditForm(AgentRegistrationForm):
    """An agent's registration, changed. The slug stays: it is in every URL clients hold."""

    class Meta(AgentRegistrationForm.Meta):
        fields = tuple(f for f in AgentRegistrationForm.Meta.fields if f != "slug")


def _user_field_length(name: str) -> int:
    length: int = get_user_model()._meta.get_field(name).max_length
    return length


class PersonAddForm(forms.Form):
    """Add someone to a tenant: an existing account by its user name, or a new account that
    gets a one-time link to set its password."""

    # The account model's own bounds: a longer value would reach the database and fail there.
    username = forms.CharField(
        max_length=_user_field_length("username"),
        label="User name",
        help_text="An existing account joins at once. For someone new, the user name their "
        "account will have: you get a link to pass on, with which they set a password.",
    )
    email = forms.EmailField(
        required=False,
        max_length=_user_field_length("email"),
        help_text="For a new account only, for the operators' records.",
    )
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class ApiKeyForm(forms.Form):
    name = forms.CharField(
        max_length=ApiKey._meta.get_field("name").max_length,
        help_text="What the key is for, e.g. 'billing-bot'.",
    )
    principal = forms.CharField(
        max_length=ApiKey._meta.get_field("principal").max_length,
        required=False,
        help_text="Owner of the tasks made with this key (default: its name).",
    )
    tenant_admin = forms.BooleanField(
        required=False, label="Tenant admin (sees every task of the tenant)"
    )
    this_agent_only = forms.BooleanField(
        required=False, initial=True, label="Works only for this agent"
    )

    def scopes(self) -> list[str]:
        return [ApiKey.SCOPE_TENANT_ADMIN] if self.cleaned_data["tenant_admin"] else []


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)
