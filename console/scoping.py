"""Who sees what in the console. Every page builds its queries from these, so scoping lives in
one place: staff operators see every tenant; anyone else sees the tenants they belong to, and
an object of any other tenant is 404, exactly like one that does not exist."""

from __future__ import annotations

import re
import uuid

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from agents.models import Agent, Membership, Tenant
from push_app.models import Delivery
from tasks_app.models import Task

User = AbstractBaseUser | AnonymousUser


def visible_tenants(user: User) -> QuerySet[Tenant]:
    if not user.is_authenticated or not user.is_active:
        return Tenant.objects.none()
    if user.is_staff:
        return Tenant.objects.all()
    # A deactivated tenant is closed on the A2A endpoints; its people no longer see it either.
    return Tenant.objects.filter(memberships__user=user, is_active=True).distinct()


def visible_agents(user: User) -> QuerySet[Agent]:
    return Agent.objects.filter(tenant__in=visible_tenants(user)).select_related("tenant")


def visible_tasks(user: User) -> QuerySet[Task]:
    return Task.objects.filter(tenant__in=visible_tenants(user))


def visible_deliveries(user: User) -> QuerySet[Delivery]:
    return Delivery.objects.filter(config__task__tenant__in=visible_tenants(user))


def tenant_or_404(user: User, tenant_slug: str) -> Tenant:
    tenant = visible_tenants(user).filter(slug=tenant_slug).first()
    if tenant is None:
        raise Http404("No such tenant.")
    return tenant


def agent_or_404(user: User, tenant_slug: str, agent_slug: str) -> Agent:
    agent = visible_agents(user).filter(tenant__slug=tenant_slug, slug=agent_slug).first()
    if agent is None:
        raise Http404("No such agent.")
    return agent


_SLUG = re.compile(r"[a-z0-9-]{1,63}")


def agent_path(agent: Agent) -> str:
    """How pages name an agent in filters and links: `<tenant>/<agent>`."""
    return f"{agent.tenant.slug}/{agent.slug}"


def agent_paths(user: User, limit: int = 500) -> list[str]:
    """The agents a filter may name, for its choices."""
    rows = visible_agents(user).order_by("tenant__slug", "slug").values_list("tenant__slug", "slug")
    return [f"{tenant}/{slug}" for tenant, slug in rows[:limit]]


def agent_from_path(user: User, value: str) -> Agent:
    """The agent a `<tenant>/<agent>` filter names; 404 for anything else, malformed included."""
    tenant_slug, _, agent_slug = value.partition("/")
    if not (_SLUG.fullmatch(tenant_slug) and _SLUG.fullmatch(agent_slug)):
        raise Http404("No such agent.")
    return agent_or_404(user, tenant_slug, agent_slug)


def delivery_or_404(user: User, delivery_id: uuid.UUID) -> Delivery:
    delivery = (
        visible_deliveries(user)
        .select_related("config__task__tenant", "config__task__agent", "event")
        .filter(pk=delivery_id)
        .first()
    )
    if delivery is None:
        raise Http404("No such delivery.")
    return delivery


def task_or_404(user: User, tenant_slug: str, task_id: str) -> Task:
    try:
        pk = uuid.UUID(task_id)
    except ValueError as exc:  # a malformed id is a URL to nothing, like any other
        raise Http404("No such task.") from exc
    task = (
        visible_tasks(user)
        .select_related("agent", "tenant")
        .filter(tenant__slug=tenant_slug, pk=pk)
        .first()
    )
    if task is None:
        raise Http404("No such task.")
    return task


def role_in(user: User, tenant: Tenant) -> str:
    """'operator' for staff, else the membership's role ('' when none)."""
    if user.is_authenticated and user.is_staff:
        return "operator"
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    return membership.role if membership else ""


def owned_tenants(user: User, tenants: list[Tenant]) -> list[Tenant]:
    """Those of `tenants` the user (not staff) owns, in one query."""
    owned = set(
        Membership.objects.filter(
            user=user, role=Membership.Role.OWNER, tenant__in=tenants
        ).values_list("tenant_id", flat=True)
    )
    return [t for t in tenants if t.pk in owned]


MANAGING_ROLES = ("operator", Membership.Role.OWNER)


def can_manage(user: User, tenant: Tenant) -> bool:
    return role_in(user, tenant) in MANAGING_ROLES


def require_manager(user: User, tenant: Tenant) -> None:
    """Owners and operators register agents and manage keys; members only look."""
    if not can_manage(user, tenant):
        raise PermissionDenied(
            f"Only owners of tenant {tenant.slug!r} (or operators) can do this; you are a member."
        )


def require_operator(user: User) -> None:
    if not (user.is_authenticated and user.is_staff):
        raise PermissionDenied("This page is for the platform's operators (staff accounts).")
