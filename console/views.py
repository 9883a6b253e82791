"""Console pages: the overview, agent registration (each executor kind's fields, and "test
connection"), an agent's page (URLs, client snippet, keys, card preview, the Try-it console) and
its edit, disable and delete. Tasks, people, background work, charts and the actions taken as
the person logged in (Try it's send among them) live in their own modules."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from a2a_platform.versions import V0_1, V0_3, V1_0
from agents.cards import agent_base_url, agent_card_json, grpc_tenant
from agents.forms import (
    SECRET_POST_FIELDS,
    agent_connection_test_answer,
    executor_secrets_status,
    kind_testable,
)
from agents.models import Agent
from agents.services import (
    ActionRefused,
    agent_create,
    agent_delete,
    agent_set_active,
    agent_task_counts,
    api_key_create,
)

from .forms import AgentEditForm, AgentRegistrationForm, ApiKeyForm, pretty_json
from .scoping import MANAGING_ROLES, require_manager
from .selectors import (
    agent_get_or_404,
    api_key_list,
    membership_role,
    overview_get,
    tenant_get_or_404,
)
from .services import agent_change, api_key_revoke


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    return render(request, "console/overview.html", overview_get(user=request.user))


@sensitive_post_parameters(*SECRET_POST_FIELDS)
@login_required
def agent_new(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug)
    require_manager(request.user, tenant)
    form = AgentRegistrationForm(request.POST or None, tenant=tenant)
    if request.method == "POST" and form.is_valid():
        try:  # agent_create owns its transaction: a refused save leaves nothing behind
            agent = agent_create(
                tenant=tenant,
                executor_secrets=form.secrets_to_store() or {},
                **form.agent_fields(),
            )
        except IntegrityError:  # registered a moment ago by someone else
            form.add_error("slug", f"Tenant {tenant.slug!r} has an agent {form.instance.slug!r}.")
        except ValidationError as exc:  # e.g. a host that resolves elsewhere since the check
            for field, errors in exc.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Agent {agent.slug} registered; it is live at its URLs.")
            return redirect("console:agent", tenant_slug=agent.tenant.slug, agent_slug=agent.slug)
    return render(
        request,
        "console/agent_new.html",
        {
            "tenant": tenant,
            "form": form,
            "test_url": reverse("console:agent-test-connection", args=[tenant.slug]),
        },
    )


@sensitive_post_parameters(*SECRET_POST_FIELDS)
@login_required
@require_POST
def agent_test_connection(
    request: HttpRequest, tenant_slug: str, agent_slug: str | None = None
) -> HttpResponse:
    """The "test connection" of the registration and edit pages and of the agent's page: the
    posted kind and its group are checked as a save would check them (a URL the SSRF guard
    refuses is reported, not tried), then the kind's outside service is reached with the typed
    secrets or, for an existing agent, the stored ones where none is typed; a new agent is
    named by the slug typed in the form. With no kind posted the agent is tested as stored.
    Answers JSON {"ok": bool, "message": str} ("errors": field -> messages when the form is
    refused). Never echoes a secret."""
    if agent_slug is None:
        tenant, agent = tenant_get_or_404(user=request.user, tenant_slug=tenant_slug), None
    else:
        agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
        tenant = agent.tenant
    require_manager(request.user, tenant)
    answer, status = agent_connection_test_answer(request.POST, agent=agent, tenant=tenant)
    return JsonResponse(answer, status=status)


def _snippet(agent: Agent) -> str:
    key_header = "" if agent.is_public else ', headers={"X-API-Key": API_KEY}'
    key_line = "" if agent.is_public else 'API_KEY = "a2a_..."  # a key of this tenant\n'
    return f'''import asyncio, httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest

{key_line}URL = "{agent_base_url(agent)}"


async def main() -> None:
    async with httpx.AsyncClient(timeout=60{key_header}) as http:
        card = await A2ACardResolver(http, URL).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        request = SendMessageRequest(
            message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hello")])
        )
        async for response in client.send_message(request):
            print(response)


asyncio.run(main())
'''


NEW_SECRET = "console_new_secret"


def _new_secret(request: HttpRequest, agent: Agent) -> dict | None:
    """A key created a moment ago for this agent: shown on this one page view, then gone."""
    made = request.session.get(NEW_SECRET)
    if not made or made.get("agent") != agent.pk:
        return None
    del request.session[NEW_SECRET]
    return made


@never_cache  # the page may carry a new key's secret
@login_required
def agent_detail(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    base = agent_base_url(agent)
    versions = agent.versions  # only those the agent serves (Agent.protocol_versions)
    urls = [
        ("Agent card", base + ".well-known/agent-card.json"),
        (f"JSON-RPC 2.0 (v{', v'.join(versions)})", base),
        *[
            (f"HTTP+JSON v{v}", url)
            for v, url in ((V1_0, base.rstrip("/")), (V0_3, base + "v1"))
            if v in versions
        ],
    ]
    role = membership_role(user=request.user, tenant=agent.tenant)
    return render(
        request,
        "console/agent.html",
        {
            "agent": agent,
            "tenant": agent.tenant,
            "urls": urls,
            "grpc_address": settings.A2A_GRPC_PUBLIC_ADDRESS,
            "grpc_versions": [v for v in versions if v != V0_1],
            "grpc_tenant": grpc_tenant(agent),
            "snippet": _snippet(agent),
            "card_json": pretty_json(agent_card_json(agent)),
            "keys": api_key_list(agent=agent),
            "key_form": ApiKeyForm(),
            "can_manage": role in MANAGING_ROLES,
            "testable": kind_testable(agent.executor_kind),
            "test_url": reverse(
                "console:agent-test-connection", args=[agent.tenant.slug, agent.slug]
            ),
            "role": role,
            "new_secret": _new_secret(request, agent),
            # Try it sends as the person logged in (console.views_actions); a disabled agent
            # takes no messages, so its page offers none.
            "takes_messages": agent.is_active and agent.tenant.is_active,
        },
    )


@login_required
@require_POST
def key_create(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    require_manager(request.user, agent.tenant)
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"API key not created: {field}: {' '.join(errors)}")
    else:
        key, secret = api_key_create(
            tenant=agent.tenant,
            name=form.cleaned_data["name"],
            principal=form.cleaned_data["principal"],
            scopes=form.scopes(),
            agent=agent if form.cleaned_data["this_agent_only"] else None,
        )
        # Shown once, on the next page only; never stored beyond this hop.
        request.session[NEW_SECRET] = {"agent": agent.pk, "prefix": key.prefix, "secret": secret}
        messages.success(request, f"API key {key.name} created.")
    return redirect("console:agent", tenant_slug=agent.tenant.slug, agent_slug=agent.slug)


@login_required
@require_POST
def key_revoke(
    request: HttpRequest, tenant_slug: str, agent_slug: str, prefix: str
) -> HttpResponse:
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    require_manager(request.user, agent.tenant)
    key = api_key_revoke(agent=agent, prefix=prefix)
    if key is None:
        messages.error(request, f"No active key {prefix!r} for this agent.")
    else:
        messages.success(request, f"API key {key.name} ({key.prefix}…) revoked.")
    return redirect("console:agent", tenant_slug=agent.tenant.slug, agent_slug=agent.slug)


# --- an agent's life: edit, disable or enable, delete ----------------------------------------


@sensitive_post_parameters(*SECRET_POST_FIELDS)
@login_required
def agent_edit(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    require_manager(request.user, agent.tenant)
    form = AgentEditForm(request.POST or None, instance=agent, tenant=agent.tenant)
    if request.method == "POST" and form.is_valid():
        agent_change(
            agent=form.save(commit=False),  # the form's values on the agent, not yet saved
            fields=AgentEditForm.Meta.fields,
            executor_secrets=form.secrets_to_store(),
        )
        messages.success(
            request,
            f"Agent {agent.slug} saved; its card and every process follow within "
            f"{settings.A2A_AUTH_CACHE_SECONDS:g} s.",
        )
        return redirect("console:agent", tenant_slug=agent.tenant.slug, agent_slug=agent.slug)
    return render(
        request,
        "console/agent_edit.html",
        {
            "tenant": agent.tenant,
            "agent": agent,
            "form": form,
            "secrets_status": executor_secrets_status(agent),
            "test_url": reverse(
                "console:agent-test-connection", args=[agent.tenant.slug, agent.slug]
            ),
        },
    )


@login_required
@require_POST
def agent_active(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    require_manager(request.user, agent.tenant)
    value = request.POST.get("active")
    if value not in ("true", "false"):
        return HttpResponseBadRequest(
            f"'active' must be true or false, not {str(value)[:20]!r}.", content_type="text/plain"
        )
    active = value == "true"
    agent_set_active(agent=agent, active=active)
    if active:
        messages.success(request, f"Agent {agent.slug} enabled: its URLs answer again.")
    else:
        messages.success(
            request,
            f"Agent {agent.slug} disabled: its URLs answer 'agent not found'; its tasks are "
            "kept and runs in flight finish. Enable it again or delete it below.",
        )
    return redirect("console:agent", tenant_slug=agent.tenant.slug, agent_slug=agent.slug)


@login_required
def agent_delete_view(request: HttpRequest, tenant_slug: str, agent_slug: str) -> HttpResponse:
    """A page that says what goes with the agent, and asks for its slug to be typed."""
    agent = agent_get_or_404(user=request.user, tenant_slug=tenant_slug, agent_slug=agent_slug)
    require_manager(request.user, agent.tenant)
    problem = ""
    if request.method == "POST":
        if request.POST.get("confirm_slug", "").strip() != agent.slug:
            problem = f"Type the agent's slug, {agent.slug}, to confirm."
        else:
            try:
                counts = agent_delete(agent=agent)
            except ActionRefused as exc:
                problem = str(exc)
            else:
                messages.success(
                    request,
                    f"Agent {agent.slug} deleted, with its {counts['tasks']} "
                    f"task{'s' if counts['tasks'] != 1 else ''} and {counts['keys']} "
                    f"key{'s' if counts['keys'] != 1 else ''}.",
                )
                return redirect("console:overview")
    return render(
        request,
        "console/agent_delete.html",
        {
            "tenant": agent.tenant,
            "agent": agent,
            "counts": agent_task_counts(agent=agent),
            "problem": problem,
        },
        status=400 if problem else 200,
    )
