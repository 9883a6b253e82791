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
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
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


def _invite_link(user: object) -> str:
    """A one-time link to set the account's password (Django's password-reset token: it stops
    working once the password is set, and after PASSWORD_RESET_TIMEOUT), on the platform's
    public URL, like the agent cards."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))  # type: ignore[attr-defined]
    token = default_token_generator.make_token(user)  # type: ignore[arg-type]
    path = reverse("console:welcome", kwargs={"uidb64": uid, "token": token})
    return settings.A2A_PUBLIC_BASE_URL + path


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
    tenant = tenant_or_404(request.user, tenant_slug)
    require_manager(request.user, tenant)
    form = PersonAddForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"Nobody added: {field}: {' '.join(errors)}")
        return _back(tenant)
    User = get_user_model()
    # By user name only: an email is whatever an account's maker typed, so it says nothing
    # about who holds the account.
    username = User.normalize_username(form.cleaned_data["username"])
    email, role = form.cleaned_data["email"], form.cleaned_data["role"]
    user = User.objects.filter(username=username).first()
    created = user is None
    try:
        with transaction.atomic():
            if created:
                user = _new_account(User, username, email)
            elif not user.is_active:
                raise ActionRefused(
                    f"The account {username} is disabled; an operator can enable it in the admin."
                )
            membership_add(tenant=tenant, user=user, role=role)
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


def _new_account(User: type, username: str, email: str) -> object:
    """An account with no usable password yet, its name checked as Django's forms check it."""
    try:
        User.username_validator(username)
    except ValidationError as exc:
        problem = " ".join(exc.messages)
        raise ActionRefused(f"{username!r} cannot be a user name: {problem}") from None
    return User.objects.create_user(username=username, email=email)


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
