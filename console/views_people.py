"""Console pages: the people of a tenant. Everyone in the tenant sees who is in it; owners and
operators add people (an existing account, or a new one invited by a one-time link to set its
password), change roles and remove people. A tenant that has owners always keeps one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from agents.models import Membership, Tenant
from agents.services import (
    ActionRefused,
    membership_add,
    membership_remove,
    membership_set_role,
)

from .forms import PersonAddForm, RoleForm
from .scoping import can_manage, require_manager, tenant_or_404

NEW_INVITE = "console_new_invite"


def _invite_link(request: HttpRequest, user: object) -> str:
    """A one-time link to set the account's password (Django's password-reset token: it stops
    working once the password is set, and after PASSWORD_RESET_TIMEOUT)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))  # type: ignore[attr-defined]
    token = default_token_generator.make_token(user)  # type: ignore[arg-type]
    path = reverse("console:welcome", kwargs={"uidb64": uid, "token": token})
    return request.build_absolute_uri(path)


def _membership_or_404(tenant: Tenant, pk: int) -> Membership:
    membership = Membership.objects.select_related("user", "tenant").filter(tenant=tenant, pk=pk)
    found = membership.first()
    if found is None:
        raise Http404("No such person in this tenant.")
    return found


@never_cache  # the page may carry an invitation link
@login_required
def people(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_or_404(request.user, tenant_slug)
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
            "memberships": tenant.memberships.select_related("user").order_by("user__username"),
            "can_manage": can_manage(request.user, tenant),
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
    tenant = tenant_or_404(request.user, tenant_slug)
    require_manager(request.user, tenant)
    form = PersonAddForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Nobody added: {field}: {' '.join(errors)}")
        return _back(tenant)
    who, email, role = (form.cleaned_data[k] for k in ("who", "email", "role"))
    users = get_user_model().objects
    user = users.filter(Q(username=who) | Q(email__iexact=who), is_active=True).first()
    try:
        with transaction.atomic():
            created = user is None
            if created:
                if "@" in who:
                    raise ActionRefused(
                        f"No account has the email {who}. To invite someone new, give the "
                        "user name their account will have, and the email beside it."
                    )
                user = users.create_user(username=who, email=email)  # no usable password yet
            membership_add(tenant=tenant, user=user, role=role)
    except ActionRefused as exc:
        messages.error(request, f"Nobody added: {exc}")
        return _back(tenant)
    if created:
        request.session[NEW_INVITE] = {
            "tenant": tenant.pk,
            "username": user.get_username(),
            "link": _invite_link(request, user),
        }
        messages.success(
            request, f"Account {who} made and added as {role}: send them the link below."
        )
    else:
        messages.success(request, f"{user.get_username()} added to {tenant.slug} as {role}.")
    return _back(tenant)


@login_required
@require_POST
def person_role(request: HttpRequest, tenant_slug: str, membership_id: int) -> HttpResponse:
    tenant = tenant_or_404(request.user, tenant_slug)
    require_manager(request.user, tenant)
    membership = _membership_or_404(tenant, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"Role not changed: {' '.join(form.errors.get('role', []))}")
        return _back(tenant)
    try:
        membership_set_role(membership=membership, role=form.cleaned_data["role"])
    except ActionRefused as exc:
        messages.error(request, f"Role not changed: {exc}")
    else:
        messages.success(
            request, f"{membership.user.get_username()} is now {membership.role} of {tenant.slug}."
        )
    return _back(tenant)


@login_required
@require_POST
def person_remove(request: HttpRequest, tenant_slug: str, membership_id: int) -> HttpResponse:
    tenant = tenant_or_404(request.user, tenant_slug)
    require_manager(request.user, tenant)
    membership = _membership_or_404(tenant, membership_id)
    try:
        membership_remove(membership=membership)
    except ActionRefused as exc:
        messages.error(request, f"Not removed: {exc}")
    else:
        messages.success(request, f"{membership.user.get_username()} removed from {tenant.slug}.")
    return _back(tenant)
