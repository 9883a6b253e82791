"""Admin for registration: tenants, agents (each executor kind's fields as in the console,
validated on save; secrets write-only; "test connection"), API keys, and the tenants'
push-signing keys (read-only; rotated and retired by actions)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from .auth import hash_secret, new_key_material
from .cards import agent_base_url
from .crypto import DecryptionFailed
from .executors import REGISTRY, executor_kind_choices
from .executors.secrets import executor_secret_names
from .forms import (
    SECRET_POST_FIELDS,
    AgentKindFormMixin,
    JSONInputField,
    agent_connection_test_answer,
    executor_secrets_status,
    kind_field_names,
    kind_slug,
)
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
from .validation import api_key_scopes_validate


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
    if isinstance(field, models.JSONField):
        kwargs.setdefault("form_class", JSONInputField)
    return field.formfield(**kwargs)


AGENT_JSON_FIELDS = (
    "executor_config",
    "skills",
    "extended_skills",
    "default_input_modes",
    "default_output_modes",
)


class AgentForm(AgentKindFormMixin, forms.ModelForm):
    executor_kind = forms.ChoiceField(choices=executor_kind_choices)
    # Operators may still edit the whole config as JSON: a changed object wins over the fields.
    config_json_editable = True

    class Meta:
        model = Agent
        fields = "__all__"
        formfield_callback = _https_urls
        help_texts = {
            "executor_config": "The whole config as stored. Edit it with the fields of the "
            "agent's kind above; or change this JSON object to replace the whole config at once "
            "(a changed object wins over the fields). Put API keys and tokens in the secrets, "
            "never here: whoever edits the agent sees it.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is None:  # as the console's registration form starts
            self.initial.setdefault("default_input_modes", list(DEFAULT_MODES))
            self.initial.setdefault("default_output_modes", list(DEFAULT_MODES))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        self.agent_kind_check(cleaned, AGENT_JSON_FIELDS)
        return cleaned


# What is stored of the config and the secrets: the JSON object, the secrets' names, the
# free-form secrets (python's; any kind's as one object) and the tick that clears them all.
AGENT_RAW_FIELDS = (
    "executor_config",
    "executor_secrets_status",
    "executor_secrets",
    "executor_secrets_clear",
)
# The agent's own fields before the kinds' groups; the card's come after.
AGENT_HEAD_FIELDS = (
    "tenant",
    "slug",
    "name",
    "description",
    "version",
    "executor_kind",
)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    formfield_overrides = {
        models.URLField: {"assume_scheme": "https"},
        models.JSONField: {"form_class": JSONInputField},
    }
    list_display = ("slug", "tenant", "name", "executor_kind", "visibility", "is_active", "card")
    list_filter = ("tenant", "executor_kind", "visibility", "is_active")
    list_select_related = ("tenant",)
    search_fields = ("slug", "name", "tenant__slug")
    readonly_fields = ("executor_secrets_status",)

    class Media:
        js = ("console/agent_form.js",)

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

    @method_decorator(sensitive_post_parameters(*SECRET_POST_FIELDS))
    def changeform_view(self, *args: Any, **kwargs: Any) -> Any:
        return super().changeform_view(*args, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> list[Any]:
        """The agent's fields, one group per executor kind (agent_form.js shows the chosen
        one), the stored config as JSON with the free-form secrets, then the card's fields."""
        stored = _stored_secret_names(obj)
        test_url = (
            reverse("admin:agents_agent_test_connection", args=[obj.pk])
            if obj is not None and obj.pk
            else reverse("admin:agents_agent_test_connection_new")
        )
        groups = []
        for kind in REGISTRY.values():
            description = format_html("{}", kind.description)
            if kind.secret_clashes is not None:
                description = format_html(
                    "{} Its secrets: the free-form executor secrets below.", description
                )
            if kind.connection_test is not None:
                slug = kind_slug(kind.name)
                description = format_html(
                    '{}<div class="test-connection"><button type="button" class="button" '
                    'data-test-connection data-url="{}" aria-describedby="test-status-{}">'
                    'Test connection</button> <span class="test-status" id="test-status-{}" '
                    'role="status" aria-live="polite"></span></div>',
                    description,
                    test_url,
                    slug,
                    slug,
                )
            groups.append(
                (
                    f"Executor: {kind.name}",
                    {
                        "classes": ("kind-group", f"kind-group--{kind_slug(kind.name)}"),
                        "description": description,
                        "fields": kind_field_names(kind.name, stored),
                    },
                )
            )
        placed = {*AGENT_HEAD_FIELDS, *AGENT_RAW_FIELDS}
        rest = [f for f in super().get_fields(request, obj) if f not in placed]
        rest = [f for f in rest if not f.startswith(("cfg__", "secret__", "secret_remove__"))]
        return [
            (None, {"fields": AGENT_HEAD_FIELDS}),
            *groups,
            ("Executor config as stored, and secrets", {"fields": AGENT_RAW_FIELDS}),
            ("Card and access", {"fields": rest}),
        ]

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.test_connection_view)
        return [
            path("test-connection/", view, name="agents_agent_test_connection_new"),
            path("<path:object_id>/test-connection/", view, name="agents_agent_test_connection"),
            *super().get_urls(),
        ]

    @method_decorator(sensitive_post_parameters(*SECRET_POST_FIELDS))
    def test_connection_view(self, request: HttpRequest, object_id: str = "") -> HttpResponse:
        """The console's "test connection" for the admin's form (agents.forms does both)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        agent, tenant = None, None
        if object_id:
            agent = self.get_object(request, unquote(object_id))
            if agent is None:
                raise Http404("No such agent.")
            if not self.has_change_permission(request, agent):
                raise PermissionDenied
        elif not self.has_add_permission(request):
            raise PermissionDenied
        else:  # a new agent: the tenant chosen in the form
            tenant_id = request.POST.get("tenant", "")
            tenant = Tenant.objects.filter(pk=tenant_id).first() if tenant_id.isdigit() else None
        answer, status = agent_connection_test_answer(request.POST, agent=agent, tenant=tenant)
        return JsonResponse(answer, status=status)

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


def _stored_secret_names(agent: Agent | None) -> list[str]:
    if agent is None or not agent.executor_secrets_encrypted:
        return []
    try:
        return executor_secret_names(agent.executor_secrets_encrypted)
    except DecryptionFailed:
        return []


class ApiKeyForm(forms.ModelForm):
    class Meta:
        model = ApiKey
        fields = ("tenant", "name", "principal", "scopes", "agent", "revoked_at")
        field_classes = {"scopes": JSONInputField}

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
