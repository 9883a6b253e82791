"""Console page: a tenant's limits (agents.plans). Its plan, every limit in effect with where it
comes from (the plan, the operator's default plan, the tenant's own override), and the agents'
and keys' own overrides with what they make of each.

Everyone in the tenant sees the page, as they see its agents and keys; operators see every
tenant's. Nobody changes a limit here: operators set plans and overrides in the admin, and the
page links staff there (docs/plans.md)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agents import plans
from agents.cache import tenant_limits
from agents.models import ApiKey, Plan, Tenant

from .selectors import agent_scope, tenant_get_or_404

# Where a tenant's value of a limit comes from.
FROM_TENANT = "tenant"
FROM_PLAN = "plan"
FROM_DEFAULT_PLAN = "default-plan"
FROM_NOTHING = "none"


def limit_shown(value: int, unit: str) -> str:
    """A limit as a person reads it: "unlimited" for 0, else the number and its unit
    ("1 run", "5 requests/s")."""
    if value == 0:
        return "unlimited"
    if value == 1:
        word, slash, per = unit.partition("/")
        unit = word.removesuffix("s") + slash + per
    return f"{value:,} {unit}"


@dataclass(frozen=True)
class TenantLimit:
    """One limit of the tenant: its value in effect, and where that comes from."""

    spec: plans.LimitSpec
    value: int
    source: str  # FROM_*
    source_text: str
    plan_value: int | None  # the plan's, when the tenant has one (its own or the default)

    @property
    def shown(self) -> str:
        return limit_shown(self.value, self.spec.unit)

    @property
    def plan_shown(self) -> str:
        return "-" if self.plan_value is None else limit_shown(self.plan_value, self.spec.unit)


@dataclass(frozen=True)
class OwnLimit:
    """A limit of an agent or a key: its own value, else the tenant's."""

    spec: plans.LimitSpec
    value: int
    own: bool

    @property
    def shown(self) -> str:
        return limit_shown(self.value, self.spec.unit)


@dataclass(frozen=True)
class Holder:
    """An agent or an API key, with the limits that may be set on it."""

    pk: int
    name: str
    detail: str
    limits: list[OwnLimit]


def plan_in_effect(tenant: Tenant) -> tuple[Plan | None, bool]:
    """The tenant's plan, else the operator's default plan (A2A_DEFAULT_PLAN) if it exists;
    and whether it is the default."""
    if tenant.plan is not None:
        return tenant.plan, False
    name = plans.default_plan_name()
    default = Plan.objects.filter(name=name).first() if name else None
    return default, default is not None


def tenant_limit_rows(
    tenant: Tenant, limits: plans.Limits, plan: Plan | None, is_default: bool
) -> list[TenantLimit]:
    """Every limit of the tenant, in effect (`limits`), with where it comes from: its own
    override, else its plan or the default plan (`plan`, `is_default`), else nothing."""
    own = tenant.limits or {}
    rows = []
    for spec in plans.LIMITS:
        if spec.name in own:
            source, text = FROM_TENANT, "this tenant's own"
        elif plan is not None and is_default:
            source, text = FROM_DEFAULT_PLAN, f"the default plan, {plan.name}"
        elif plan is not None:
            source, text = FROM_PLAN, f"plan {plan.name}"
        else:
            source, text = FROM_NOTHING, "no plan"
        rows.append(
            TenantLimit(
                spec=spec,
                value=getattr(limits, spec.name),
                source=source,
                source_text=text,
                plan_value=getattr(plan, spec.name) if plan is not None else None,
            )
        )
    return rows


def _own_limits(scope: str, own: dict[str, int], limits: plans.Limits) -> list[OwnLimit]:
    return [
        OwnLimit(
            spec=spec, value=own.get(spec.name, getattr(limits, spec.name)), own=spec.name in own
        )
        for spec in plans.LIMITS
        if scope in spec.scopes
    ]


def _specs(scope: str) -> list[plans.LimitSpec]:
    return [spec for spec in plans.LIMITS if scope in spec.scopes]


@login_required
def limits(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    in_effect = tenant_limits(tenant)  # as every call of the tenant's agents works them out
    plan, plan_is_default = plan_in_effect(tenant)
    agents = [
        Holder(
            pk=agent.pk,
            name=agent.name,
            detail=agent.slug,
            limits=_own_limits(plans.AGENT, agent.limits or {}, in_effect),
        )
        for agent in agent_scope(user=request.user).filter(tenant=tenant).order_by("slug")
    ]
    # Keys with limits of their own; the others have the tenant's per-key limits.
    active_keys = ApiKey.objects.filter(tenant=tenant, revoked_at__isnull=True)
    keys = [
        Holder(
            pk=key.pk,
            name=key.name,
            detail=f"{key.prefix}…",
            limits=_own_limits(plans.KEY, key.limits, in_effect),
        )
        for key in active_keys.exclude(limits={}).order_by("name", "prefix")
    ]
    return render(
        request,
        "console/limits.html",
        {
            "tenant": tenant,
            "plan": plan,
            "plan_is_default": plan_is_default,
            "weight": in_effect.weight,
            "rows": tenant_limit_rows(tenant, in_effect, plan, plan_is_default),
            "agent_specs": _specs(plans.AGENT),
            "agents": agents,
            "key_specs": _specs(plans.KEY),
            "keys": keys,
            "other_keys": active_keys.filter(limits={}).count(),
        },
    )
