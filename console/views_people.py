"""Console pages: the people of a tenant. Everyone in the tenant sees who is in it; owners and
operators add people (an existing account by its user name, or a new one invited by a one-time
link to set its password), change roles and remove people. A tenant that has owners always
keeps one."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from agents.models import Membership, Tenant
from agents.services import ActionRefused, membership_remove, membership_set_role

from .forms import PersonAddForm, RoleForm
from .scoping import can_manage, require_manager
from .selectors import membership_get_or_404, membership_list, tenant_get_or_404
from .services import membership_add_by_username

NEW_INVITE = "console_new_invite"


def _invite_link(user: object) -> str:
    """A one-time link to set the account's password (Django's password-reset token: it stops
    working once the password is set, and after PASSWORD_RESET_TIMEOUT), on the platform's
    public URL, like the agent cards."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))  # type: ignore[attr-defined]
    token = default_token_generator.make_token(user)  # type: ignore[arg-type]
    path = reverse("console:welcome", kwargs={"uidb64": uid, "token": token})
    return settings.A2A_PUBLIC_BASE_URL + path


@never_cache  # the page may carry an invitation link
@login_required
def people(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    invite = request.session.get(NEW_INVITE)
    if invite and invite.get("tenant") == tenant.pk:
        del request.session[NEW_INVITE]
    else:
        invite = None
    return render(
        request,
        "console/people.html",
        {
            "tenant": tenant,
            "memberships": membership_list(tenant=tenant),
            "can_manage": can_manage(request.user, tenant),
            # Emails only to operators: an owner could otherwise read any account's email by
            # adding it.
            "show_emails": request.user.is_staff,
            "add_form": PersonAddForm(),
            "roles": Membership.Role.choices,
            "invite": invite,
        },
    )


def _back(tenant: Tenant) -> HttpResponse:
    return redirect("console:people", tenant_slug=tenant.slug)


@login_required
@require_POST
def person_add(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    form = PersonAddForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Nobody added: {field}: {' '.join(errors)}")
        return _back(tenant)
    username = get_user_model().normalize_username(form.cleaned_data["username"])
    role = form.cleaned_data["role"]
    try:
        user, created = membership_add_by_username(
            tenant=tenant, username=username, email=form.cleaned_data["email"], role=role
        )
    except ActionRefused as exc:
        messages.error(request, f"Nobody added: {exc}")
        return _back(tenant)
    except IntegrityError:  # the same account made a moment ago by another request
        messages.error(request, f"Nobody added: {username} was added a moment ago; see below.")
        return _back(tenant)
    if created:
        request.session[NEW_INVITE] = {
            "tenant": tenant.pk,
            "username": username,
            "link": _invite_link(user),
        }
        messages.success(
            request, f"Account {username} made and added as {role}: send them the link below."
        )
    else:
        messages.success(request, f"{username} added to {tenant.slug} as {role}.")
    return _back(tenant)


@login_required
@require_POST
def person_role(request: HttpRequest, tenant_slug: str, membership_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    membership = membership_get_or_404(tenant=tenant, membership_id=membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Role not changed: {' '.join(form.errors.get('role', []))}")
        return _back(tenant)
    try:
        changed = membership_set_role(membership=membership, role=form.cleaned_data["role"])
    except ActionRefused as exc:
        messages.error(request, f"Role not changed: {exc}")
    else:
        messages.success(
            request, f"{changed.user.get_username()} is now {changed.role} of {tenant.slug}."
        )
    return _back(tenant)


@login_required
@require_POST
def person_remove(request: HttpRequest, tenant_slug: str, membership_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    membership = membership_get_or_404(tenant=tenant, membership_id=membership_id)
    try:
        membership_remove(membership=membership)
    except ActionRefused as exc:
        messages.error(request, f"Not removed: {exc}")
    else:
        messages.success(request, f"{membership.user.get_username()} removed from {tenant.slug}.")
    return _back(tenant)
