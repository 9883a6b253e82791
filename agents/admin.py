"""Admin for registration: plans, tenants, agents (each executor kind's fields as in the
console, validated on save; secrets write-only; "test connection"), API keys, token issuers
(checked now by an action), and the tenants' signing keys, which sign their push notifications
and agent cards (read-only; rotated and retired by actions).

Limits (agents.plans) are set here only: a plan's on the plan, and the overrides of a tenant,
an agent or a key on its own page, as one number field per limit that may be set there."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.db.models import Count, QuerySet
from django.forms.forms import DeclarativeFieldsMetaclass
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.urls import URLPattern, path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.debug import sensitive_post_parameters

from . import plans
from .auth import hash_secret, new_key_material
from .cards import agent_base_url
from .crypto import DecryptionFailed
from .executors import REGISTRY, executor_kind_choices
from .executors.secrets import executor_secret_names
from .forms import (
    SECRET_POST_FIELDS,
    AgentKindFormMixin,
    JSONInputField,
    ProtocolVersionsField,
    agent_connection_test_answer,
    executor_secrets_status,
    kind_field_names,
    kind_slug,
)
from .models import DEFAULT_MODES, Agent, ApiKey, Issuer, Membership, Plan, SigningKey, Tenant
from .services import (
    ActionRefused,
    IssuerCheckFailed,
    agent_delete,
    agent_delete_refusal,
    agent_task_counts,
    issuer_check,
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


# --- limits: a plan's values, and the overrides of a tenant, an agent or a key -----------------

LIMIT_PREFIX = "limit__"
# What an empty override field means at each scope.
_EMPTY_MEANS = {
    plans.TENANT: "the plan's value",
    plans.AGENT: "the tenant's value",
    plans.KEY: "the tenant's value for each key",
}


def limit_field_names(scope: str) -> list[str]:
    """The override fields of a form at `scope`, in the order of agents.plans.LIMITS."""
    return [LIMIT_PREFIX + spec.name for spec in plans.LIMITS if scope in spec.scopes]


def _limit_input(spec: plans.LimitSpec, scope: str) -> forms.IntegerField:
    empty = _EMPTY_MEANS[scope]
    return forms.IntegerField(
        required=False,
        min_value=0,
        max_value=plans.MAX_VALUE,
        label=spec.label,
        help_text=f"{spec.help} In {spec.unit}. Empty: {empty}; 0: unlimited.",
        error_messages={
            "invalid": f"Give a whole number of {spec.unit} (0 is unlimited), or leave it "
            f"empty for {empty}.",
            "min_value": "A limit is 0 (unlimited) or more.",
            "max_value": "A limit is at most %(limit_value)s; 0 is unlimited.",
        },
    )


class LimitsFormMixin(forms.Form):
    """A model form's limit overrides (the model's `limits` object) as one number field per
    limit that may be set at its scope, `limit__<name>`: shown with what is stored, and taken
    back through agents.plans.overrides_clean, the model's own check. An empty field is no
    override. Build the base of a form with `limits_form_base(scope)`; leave `limits` itself
    out of the form's fields."""

    limits_scope = plans.TENANT

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits_overrides: dict[str, int] | None = None
        for name, value in (getattr(self.instance, "limits", None) or {}).items():
            self.initial.setdefault(LIMIT_PREFIX + name, value)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        overrides: dict[str, Any] = {}
        for field in limit_field_names(self.limits_scope):
            if cleaned.get(field) is not None:
                overrides[field.removeprefix(LIMIT_PREFIX)] = cleaned[field]
        # A limit posted that the page has no field for (one of another scope, from a script)
        # is refused with the names that may be set here, not dropped unsaid.
        for field in self.data:
            if field.startswith(LIMIT_PREFIX) and field not in self.fields:
                value = self.data[field]
                if value != "":
                    overrides[field.removeprefix(LIMIT_PREFIX)] = _whole_number(value)
        try:
            self.limits_overrides = plans.overrides_clean(overrides, self.limits_scope)
        except ValidationError as exc:
            self.add_error(None, exc)
        return cleaned

    def _post_clean(self) -> None:
        super()._post_clean()
        if self.limits_overrides is not None:
            self.instance.limits = self.limits_overrides  # type: ignore[attr-defined]


def _whole_number(value: Any) -> Any:
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def limits_form_base(scope: str) -> type[LimitsFormMixin]:
    """A form base with the override fields of `scope` as declared fields, so that the admin
    (which builds its form class from the names in its fieldsets) knows them."""
    fields = {
        LIMIT_PREFIX + spec.name: _limit_input(spec, scope)
        for spec in plans.LIMITS
        if scope in spec.scopes
    }
    return DeclarativeFieldsMetaclass(  # type: ignore[no-any-return]
        f"{scope.title()}LimitsForm",
        (LimitsFormMixin,),
        {"__module__": __name__, "limits_scope": scope, **fields},
    )


_TenantLimits = limits_form_base(plans.TENANT)
_AgentLimits = limits_form_base(plans.AGENT)
_KeyLimits = limits_form_base(plans.KEY)


def _applies_within() -> str:
    return (
        "Changes reach every process as the agents' other settings do, within "
        f"A2A_AUTH_CACHE_SECONDS ({settings.A2A_AUTH_CACHE_SECONDS:g} s)."
    )


class PlanForm(forms.ModelForm):
    class Meta:
        model = Plan
        fields = ("name", "description", "weight", *plans.NAMES)

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        default = plans.default_plan_name()
        if self.instance.pk and default and self.instance.name == default != name:
            raise ValidationError(
                f"Tenants without a plan have this one by its name (A2A_DEFAULT_PLAN="
                f"{default!r}): renamed, their limits would be lifted. Change the setting first."
            )
        return name


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    """The plans tenants are given; a tenant without one has the default plan
    (A2A_DEFAULT_PLAN), which therefore cannot be deleted here."""

    form = PlanForm
    list_display = (
        "name",
        "is_default",
        "weight",
        "requests_per_second",
        "running_runs",
        "queued_runs",
        "runs_per_day",
        "tenant_count",
    )
    search_fields = ("name",)
    ordering = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Plan]:
        return super().get_queryset(request).annotate(tenant_count=Count("tenants"))

    def get_fieldsets(self, request: HttpRequest, obj: Plan | None = None) -> list[Any]:
        return [
            (None, {"fields": ("name", "description", "weight")}),
            (
                "Limits",
                {
                    "description": "0 is unlimited. Each tenant of the plan (and every tenant "
                    "without a plan, when this is the default plan) has these, unless its own "
                    f"page overrides one. {_applies_within()}",
                    "fields": plans.NAMES,
                },
            ),
        ]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, so the default plan stays
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Plan | None = None) -> bool:
        if obj is not None and obj.name == plans.default_plan_name():
            return False  # deleted, every tenant without a plan would have no limits
        return super().has_delete_permission(request, obj)

    @admin.display(boolean=True, description="Default plan")
    def is_default(self, plan: Plan) -> bool:
        return plan.name == plans.default_plan_name()

    @admin.display(description="Tenants", ordering="tenant_count")
    def tenant_count(self, plan: Plan) -> int:
        return plan.tenant_count  # type: ignore[attr-defined]


class TenantForm(_TenantLimits, forms.ModelForm):  # type: ignore[misc,valid-type]
    class Meta:
        model = Tenant
        fields = ("slug", "name", "is_active", "plan")


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin):
    form = TenantForm
    list_display = ("slug", "name", "plan", "is_active", "created_at")
    list_filter = ("plan", "is_active")
    list_select_related = ("plan",)
    search_fields = ("slug", "name")
    readonly_fields = ("limits_page",)
    inlines = [SigningKeyInline]
    actions = ["rotate_signing_key"]

    def get_fieldsets(self, request: HttpRequest, obj: Tenant | None = None) -> list[Any]:
        default = plans.default_plan_name()
        no_plan = (
            f"the default plan, {default!r} (A2A_DEFAULT_PLAN)"
            if default
            else "no limits (no A2A_DEFAULT_PLAN is set)"
        )
        return [
            (None, {"fields": ("slug", "name", "is_active")}),
            (
                "Plan and limits",
                {
                    "description": f"Without a plan the tenant has {no_plan}. A number here "
                    "overrides the plan's for this tenant; empty takes the plan's; 0 is "
                    f"unlimited. {_applies_within()}",
                    "fields": ("plan", *limit_field_names(plans.TENANT), "limits_page"),
                },
            ),
        ]

    def formfield_for_foreignkey(
        self, db_field: models.ForeignKey, request: HttpRequest, **kwargs: Any
    ) -> forms.ModelChoiceField | None:
        if db_field.name == "plan":
            kwargs["empty_label"] = "None: the default plan"
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="In the console")
    def limits_page(self, tenant: Tenant) -> str:
        if tenant.pk is None:
            return "-"
        url = reverse("console:limits", args=[tenant.slug])
        return format_html(
            '<a href="{}">The limits in effect</a>: each with where it comes from, and every '
            "agent's and key's own (what the tenant's people see).",
            url,
        )

    @admin.action(description="Rotate the signing key (pushes and cards) of the selected tenants")
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


class AgentForm(_AgentLimits, AgentKindFormMixin, forms.ModelForm):  # type: ignore[misc,valid-type]
    executor_kind = forms.ChoiceField(choices=executor_kind_choices)
    # Operators may still edit the whole config as JSON: a changed object wins over the fields.
    config_json_editable = True

    class Meta:
        model = Agent
        fields = "__all__"
        exclude = ("limits",)  # as a number field per limit (LimitsFormMixin)
        formfield_callback = _https_urls
        field_classes = {"protocol_versions": ProtocolVersionsField}
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
    list_display = (
        "slug",
        "tenant",
        "name",
        "executor_kind",
        "visibility",
        "protocol_versions",
        "is_active",
        "card",
    )
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
        rest = [
            f
            for f in rest
            if not f.startswith(("cfg__", "secret__", "secret_remove__", LIMIT_PREFIX))
        ]
        return [
            (None, {"fields": AGENT_HEAD_FIELDS}),
            *groups,
            ("Executor config as stored, and secrets", {"fields": AGENT_RAW_FIELDS}),
            ("Card and access", {"fields": rest}),
            (
                "Limits",
                {
                    "description": "This agent's own, over its tenant's: empty takes the "
                    f"tenant's; 0 is unlimited. {_applies_within()}",
                    "fields": limit_field_names(plans.AGENT),
                },
            ),
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


class ApiKeyForm(_KeyLimits, forms.ModelForm):  # type: ignore[misc,valid-type]
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


class IssuerForm(forms.ModelForm):
    class Meta:
        model = Issuer
        fields = (
            "tenant",
            "name",
            "issuer",
            "jwks_uri",
            "audiences",
            "algorithms",
            "user_claim",
            "scopes",
            "is_active",
        )
        formfield_callback = _https_urls
        help_texts = {
            "algorithms": "A JSON list of the algorithms its tokens are signed with, e.g. "
            '["RS256", "ES256"]: asymmetric only (RS, PS, ES 256/384/512, EdDSA).',
        }

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        # Said on the issuer's field (the constraint's own error would be above the form).
        tenant, url = cleaned.get("tenant"), cleaned.get("issuer")
        if url:
            twins = Issuer.objects.filter(tenant=tenant, issuer=url).exclude(pk=self.instance.pk)
            if twins.exists():
                where = f"tenant {tenant.slug}" if tenant else "platform-wide"
                self.add_error("issuer", f"This issuer is already registered {where}.")
        return cleaned


# At most this many issuers are checked by one action: each check may wait for two reads.
ISSUERS_CHECKED_AT_ONCE = 20


@admin.register(Issuer)
class IssuerAdmin(admin.ModelAdmin):
    """OAuth 2.0 / OpenID Connect token issuers: a tenant's own (also in the console, on its
    Token issuers page), or platform-wide (no tenant: trusted at every tenant). What discovery
    said is the platform's, shown read-only."""

    form = IssuerForm
    formfield_overrides = {
        models.URLField: {"assume_scheme": "https"},
        models.JSONField: {"form_class": JSONInputField},
    }
    list_display = ("name", "whose", "issuer", "is_active", "discovered_at")
    list_filter = ("is_active", "tenant")
    list_select_related = ("tenant",)
    search_fields = ("name", "issuer", "tenant__slug")
    readonly_fields = ("discovered_json", "created_at", "updated_at")
    actions = ["check_now"]

    def get_fieldsets(self, request: HttpRequest, obj: Issuer | None = None) -> list[Any]:
        return [
            (
                None,
                {
                    "description": "Empty tenant: a platform-wide issuer, whose tokens call "
                    f"every tenant's agents. {_applies_within()}",
                    "fields": ("tenant", "name", "issuer", "is_active"),
                },
            ),
            (
                "What its tokens must carry",
                {"fields": ("audiences", "algorithms", "user_claim", "scopes", "jwks_uri")},
            ),
            ("What discovery said", {"fields": ("discovered_json", "created_at", "updated_at")}),
        ]

    def save_model(self, request: HttpRequest, obj: Issuer, form: Any, change: bool) -> None:
        if change and {"issuer", "jwks_uri"} & set(form.changed_data):
            obj.discovered = {}  # it was said of the old URL (as agents.services.issuer_update)
        super().save_model(request, obj, form, change)

    @admin.display(description="Tenant", ordering="tenant__slug")
    def whose(self, issuer: Issuer) -> str:
        return issuer.tenant.slug if issuer.tenant else "(platform-wide)"

    @admin.display(description="Discovery read")
    def discovered_at(self, issuer: Issuer) -> str:
        return str((issuer.discovered or {}).get("read_at") or "-")

    @admin.display(description="What discovery said")
    def discovered_json(self, issuer: Issuer) -> str:
        if not issuer.discovered:
            return (
                "Nothing yet: it is read at the issuer's first token, or by the action "
                '"Check the selected issuers now".'
            )
        return format_html("<pre>{}</pre>", json.dumps(issuer.discovered, indent=2))

    @admin.action(description="Check the selected issuers now")
    def check_now(self, request: HttpRequest, queryset: QuerySet[Issuer]) -> None:
        chosen = list(
            queryset.select_related("tenant").order_by("pk")[: ISSUERS_CHECKED_AT_ONCE + 1]
        )
        if len(chosen) > ISSUERS_CHECKED_AT_ONCE:
            self.message_user(
                request,
                f"Select at most {ISSUERS_CHECKED_AT_ONCE} issuers to check at once; none "
                "was checked.",
                messages.ERROR,
            )
            return
        for issuer in chosen:
            try:
                summary = issuer_check(issuer=issuer)
            except IssuerCheckFailed as exc:
                self.message_user(request, f"{issuer}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{issuer}: {summary}.", messages.SUCCESS)
