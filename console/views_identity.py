"""Console pages: a tenant's token issuers, the OAuth 2.0 / OpenID Connect providers whose bearer
tokens call its agents (agents.identity, docs/console.md). Everyone in the tenant sees them,
with the platform-wide ones the operator trusts at every tenant; owners and operators add,
edit, deactivate, delete and check the tenant's own. A change reaches every process within
A2A_AUTH_CACHE_SECONDS."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents.cards import agent_base_url
from agents.identity import protected_resource_metadata_url
from agents.models import SCOPE_OPERATIONS, Issuer, Tenant
from agents.services import (
    IssuerCheckFailed,
    issuer_check,
    issuer_create,
    issuer_delete,
    issuer_set_active,
    issuer_update,
)

from .forms_identity import IssuerForm
from .scoping import can_manage, require_manager
from .selectors import (
    agent_scope,
    issuer_get_or_404,
    issuer_list,
    issuer_platform_list,
    tenant_get_or_404,
)


def _within() -> str:
    return f"within {settings.A2A_AUTH_CACHE_SECONDS:g} s on every process"


@dataclass(frozen=True)
class IssuerShown:
    """An issuer as its page shows it: the scopes of every operation (none included), and
    what discovery said, with when."""

    issuer: Issuer
    scopes: list[tuple[str, tuple[str, ...]]]
    discovered: dict[str, Any]
    read_at: datetime | None

    @classmethod
    def of(cls, issuer: Issuer) -> IssuerShown:
        discovered = dict(issuer.discovered or {})
        read_at = discovered.pop("read_at", None)
        try:
            when = datetime.fromisoformat(read_at) if isinstance(read_at, str) else None
        except ValueError:
            when = None
        return cls(
            issuer=issuer,
            scopes=[(o, issuer.required_scopes(o)) for o in SCOPE_OPERATIONS],
            discovered=discovered,
            read_at=when,
        )


@login_required
def issuers(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    # One of the tenant's agents as the example: an enabled one if there is any.
    agents = agent_scope(user=request.user).filter(tenant=tenant)
    agent = agents.order_by("-is_active", "slug").first()
    resource = agent_base_url(agent) if agent is not None else ""
    return render(
        request,
        "console/issuers.html",
        {
            "tenant": tenant,
            "issuers": [IssuerShown.of(i) for i in issuer_list(tenant=tenant)],
            "platform_issuers": [IssuerShown.of(i) for i in issuer_platform_list()],
            "within": f"{settings.A2A_AUTH_CACHE_SECONDS:g} s",
            "can_manage": can_manage(request.user, tenant),
            "agent": agent,
            "resource": resource,
            "metadata_url": protected_resource_metadata_url(resource) if resource else "",
        },
    )


def _back(tenant: Tenant) -> HttpResponse:
    return redirect("console:issuers", tenant_slug=tenant.slug)


def _form_page(
    request: HttpRequest, tenant: Tenant, form: IssuerForm, issuer: Issuer | None
) -> HttpResponse:
    return render(
        request,
        "console/issuer_form.html",
        {"tenant": tenant, "form": form, "issuer": issuer},
        status=400 if form.errors else 200,
    )


def _saved(form: IssuerForm, save: Callable[[], Issuer]) -> Issuer | None:
    """Run the service; its refusals go on the form's fields (None: refused)."""
    try:
        return save()
    except ValidationError as exc:
        form.add_service_errors(exc.message_dict)
    except IntegrityError:  # the same issuer registered a moment ago by someone else
        form.add_error("issuer", f"Tenant {form.tenant.slug!r} has this issuer already.")
    return None


@login_required
def issuer_new(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    form = IssuerForm(request.POST or None, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        fields = form.issuer_fields()
        issuer = _saved(form, lambda: issuer_create(tenant=tenant, **fields))
        if issuer is not None:
            messages.success(
                request,
                f"Issuer {issuer.name} added: its tokens call this tenant's agents {_within()}. "
                "Check it now to see that its keys can be read.",
            )
            return _back(tenant)
    return _form_page(request, tenant, form, None)


@login_required
def issuer_edit(request: HttpRequest, tenant_slug: str, issuer_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    issuer = issuer_get_or_404(tenant=tenant, issuer_id=issuer_id)
    form = IssuerForm(request.POST or None, tenant=tenant, issuer=issuer)
    if request.method == "POST" and form.is_valid():
        fields = form.issuer_fields()
        saved = _saved(form, lambda: issuer_update(issuer=issuer, fields=fields))
        if saved is not None:
            messages.success(request, f"Issuer {saved.name} saved; tokens follow {_within()}.")
            return _back(tenant)
        issuer.refresh_from_db()  # the page names it as stored, not as refused
    return _form_page(request, tenant, form, issuer)


@login_required
@require_POST
def issuer_active(request: HttpRequest, tenant_slug: str, issuer_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    issuer = issuer_get_or_404(tenant=tenant, issuer_id=issuer_id)
    value = request.POST.get("active")
    if value not in ("true", "false"):
        return HttpResponseBadRequest(
            f"'active' must be true or false, not {str(value)[:20]!r}.", content_type="text/plain"
        )
    issuer_set_active(issuer=issuer, active=value == "true")
    if issuer.is_active:
        messages.success(request, f"Issuer {issuer.name} active: its tokens are taken {_within()}.")
    else:
        messages.success(
            request,
            f"Issuer {issuer.name} deactivated: its tokens are refused {_within()}. The tasks "
            "its users own are kept.",
        )
    return _back(tenant)


@login_required
@require_POST
def issuer_delete_view(request: HttpRequest, tenant_slug: str, issuer_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    issuer = issuer_get_or_404(tenant=tenant, issuer_id=issuer_id)
    issuer_delete(issuer=issuer)
    messages.success(
        request,
        f"Issuer {issuer.name} deleted: its tokens are refused {_within()}. The tasks its users "
        "own are kept, and are theirs again if the issuer is added again.",
    )
    return _back(tenant)


@login_required
@require_POST
def issuer_check_view(request: HttpRequest, tenant_slug: str, issuer_id: int) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    issuer = issuer_get_or_404(tenant=tenant, issuer_id=issuer_id)
    try:
        summary = issuer_check(issuer=issuer)
    except IssuerCheckFailed as exc:
        messages.error(request, f"Issuer {issuer.name}: {exc}")
    else:
        messages.success(request, f"Issuer {issuer.name}: {summary}.")
    return _back(tenant)
