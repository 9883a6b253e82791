"""Who may do what in the console: owners and operators manage a tenant (agents, keys, people,
acting on tasks), members only look, and some pages are for operators alone. What a user may
see at all is console.selectors' scopes."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

from agents.models import Membership, Tenant

from .selectors import User, membership_role

MANAGING_ROLES = ("operator", Membership.Role.OWNER)


def can_manage(user: User, tenant: Tenant) -> bool:
    return membership_role(user=user, tenant=tenant) in MANAGING_ROLES


def require_manager(user: User, tenant: Tenant) -> None:
    """Owners and operators register agents and manage keys; members only look."""
    if not can_manage(user, tenant):
        raise PermissionDenied(
            f"Only owners of tenant {tenant.slug!r} (or operators) can do this; you are a member."
        )


def require_operator(user: User) -> None:
    if not (user.is_authenticated and user.is_staff):
        raise PermissionDenied("This page is for the platform's operators (staff accounts).")
