"""Admin for registration: tenants, agents (executor config validated on save, secrets
write-only), API keys, and the tenants' push-signing keys (read-only; rotated and retired by
actions)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from .auth import hash_secret, new_key_material
from .cards import agent_base_url
from .executors import executor_kind_choices
from .forms import AgentSecretsFormMixin, executor_secrets_status
from .models import DEFAULT_MODES, Agent, ApiKey, Membership, SigningKey, Tenant
from .services import (
    ActionRefused,
    agent_delete,
    agent_delete_refusal,
    agent_task_counts,
    membership_keeps_an_owner,
    signing_key_retire,
    signing_key_rotate,
)
from .validation import agent_form_check, api_key_scopes_validate


class SigningKeyInline(admin.TabularInline):
    model = SigningKey
    fields = ("kid", "algorithm", "created_at", "retired_at")
    readonly_fields = fields
    ordering = ("-created_at", "-id")
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _rotate(modeladmin: admin.ModelAdmin, request: HttpRequest, tenants: list[Tenant]) -> None:
    for tenant in tenants:
        key = signing_key_rotate(tenant=tenant)
        modeladmin.message_user(
            request,
            f"{tenant.slug}: new signing key {key.kid}; the older ones stay published "
            "until retired.",
            messages.SUCCESS,
        )


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "is_active", "created_at")
    search_fields = ("slug", "name")
    inlines = [SigningKeyInline]
    actions = ["rotate_signing_key"]

    @admin.action(description="Rotate the push-signing key of the selected tenants")
    def rotate_signing_key(self, request: HttpRequest, queryset: QuerySet[Tenant]) -> None:
        _rotate(self, request, list(queryset))


@admin.register(SigningKey)
class SigningKeyAdmin(admin.ModelAdmin):
    """Keys are made by the platform and never edited; the private half is never shown."""

    list_display = ("kid", "tenant", "algorithm", "created_at", "retired_at")
    list_filter = ("tenant",)
    search_fields = ("kid", "tenant__slug")
    fields = ("tenant", "kid", "algorithm", "public_jwk", "created_at", "retired_at")
    readonly_fields = fields
    actions = ["rotate_tenant_key", "retire"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Viewing only: the actions below go through the services.
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Rotate the signing key of the selected keys' tenants")
    def rotate_tenant_key(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        _rotate(self, request, list(Tenant.objects.filter(signing_keys__in=queryset).distinct()))

    @admin.action(description="Retire the selected keys (no longer published)")
    def retire(self, request: HttpRequest, queryset: QuerySet[SigningKey]) -> None:
        for key in queryset.select_related("tenant"):
            try:
                signing_key_retire(signing_key=key)
            except ValueError as exc:
                self.message_user(request, f"{key.kid}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{key.kid} retired.", messages.SUCCESS)


def _https_urls(field: models.Field, **kwargs: Any) -> forms.Field | None:
    if isinstance(field, models.URLField):
        kwargs.setdefault("assume_scheme", "https")
    return field.formfield(**kwargs)


AGENT_JSON_FIELDS = (
    "executor_config",
    "skills",
    "extended_skills",
    "default_input_modes",
    "default_output_modes",
)


class AgentForm(AgentSecretsFormMixin, forms.ModelForm):
    executor_kind = forms.ChoiceField(choices=executor_kind_choices)

    class Meta:
        model = Agent
        fields = "__all__"
        formfield_callback = _https_urls
        help_texts = {
            "executor_config": "JSON object; its shape depends on the kind (e.g. "
            '{"class_path": ..., "init_kwargs": {...}} for python). It is shown to whoever '
            "edits the agent: put API keys and tokens in the executor secrets below.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is None:  # as the console's registration form starts
            self.initial.setdefault("default_input_modes", list(DEFAULT_MODES))
            self.initial.setdefault("default_output_modes", list(DEFAULT_MODES))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        agent_form_check(self, cleaned, AGENT_JSON_FIELDS)
        return cleaned


# Shown right after the executor config: what is stored (names only), then the write-only
# field and the tick that clears.
AGENT_SECRET_FIELDS = ("executor_secrets_status", "executor_secrets", "executor_secrets_clear")


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("slug", "tenant", "name", "executor_kind", "visibility", "is_active", "card")
    list_filter = ("tenant", "executor_kind", "visibility", "is_active")
    list_select_related = ("tenant",)
    search_fields = ("slug", "name", "tenant__slug")
    readonly_fields = ("executor_secrets_status",)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, through agent_delete's rules
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Agent | None = None) -> bool:
        # As in the console: disabled first, and no run queued or in flight.
        if obj is not None and agent_delete_refusal(agent=obj):
            return False
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: Agent) -> None:
        agent_delete(agent=obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        # What goes with the agent (agent_delete), counted rather than listed row by row: an
        # agent may hold millions of events, and the read-only tasks admin grants no delete.
        summary = []
        for agent in objs:
            counts = agent_task_counts(agent=agent)
            summary.append(
                f"{agent}, with its {counts['tasks']} tasks (their history, artifacts, events, "
                f"push configs and deliveries) and its {counts['keys']} API keys of its own"
            )
        return summary, {"agents": len(summary)}, set(), []

    @method_decorator(sensitive_post_parameters("executor_secrets"))
    def changeform_view(self, *args: Any, **kwargs: Any) -> Any:
        return super().changeform_view(*args, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Agent | None = None) -> list[str]:
        fields = [f for f in super().get_fields(request, obj) if f not in AGENT_SECRET_FIELDS]
        at = fields.index("executor_config") + 1
        return [*fields[:at], *AGENT_SECRET_FIELDS, *fields[at:]]

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        form.save_executor_secrets(obj)

    @admin.display(description="Stored executor secrets")
    def executor_secrets_status(self, agent: Agent) -> str:
        return executor_secrets_status(agent)

    @admin.display(description="Agent card")
    def card(self, agent: Agent) -> str:
        url = agent_base_url(agent) + ".well-known/agent-card.json"
        return format_html('<a href="{}">{}</a>', url, url)


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("tenant", "name", "principal", "scopes", "agent", "revoked_at")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        try:
            api_key_scopes_validate(cleaned.get("scopes") or [])
        except ValidationError as exc:
            self.add_error("scopes", exc.message_dict["scopes"])
        agent, tenant = cleaned.get("agent"), cleaned.get("tenant")
        if agent is not None and tenant is not None and agent.tenant_id != tenant.pk:
            self.add_error("agent", "The agent must belong to the key's tenant.")
        return cleaned


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ApiKeyForm
    list_display = ("name", "prefix", "tenant", "principal", "agent", "last_used_at", "revoked_at")
    list_filter = ("tenant",)
    readonly_fields = ("prefix", "last_used_at", "created_at")

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if not change:
            obj.prefix, secret = new_key_material()
            obj.secret_hash = hash_secret(secret)
            obj.principal = obj.principal or obj.name
            super().save_model(request, obj, form, change)
            messages.warning(
                request, f"API key created. Copy it now, it is not shown again: {secret}"
            )
            return
        super().save_model(request, obj, form, change)


class MembershipForm(forms.ModelForm):
    """The console's rule in the admin too: a tenant that has owners keeps one."""

    class Meta:
        model = Membership
        fields = ("user", "tenant", "role")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        before = self.instance  # still as stored: the form's values are put on it later
        moves = cleaned.get("role") != before.role or cleaned.get("tenant") != before.tenant
        if before.pk and moves:
            try:
                membership_keeps_an_owner(before)
            except ActionRefused as exc:
                raise ValidationError(str(exc)) from None
        return cleaned


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    """Who belongs to which tenant, and as what: owners register agents and manage keys in the
    console; members look on. Staff operators need no membership."""

    form = MembershipForm
    list_display = ("user", "tenant", "role", "created_at")
    list_filter = ("tenant", "role")
    search_fields = ("user__username", "tenant__slug")
    autocomplete_fields = ("tenant",)
    raw_id_fields = ("user",)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, so each keeps its tenant an owner
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None:
            try:
                membership_keeps_an_owner(obj)
            except ActionRefused:
                return False  # the last owner of a tenant: make someone else an owner first
        return super().has_delete_permission(request, obj)
