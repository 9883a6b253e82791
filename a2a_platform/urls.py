"""Root URLs: the admin, and every hosted agent under /a2a/<tenant>/<agent>/.

Under an agent's root: its card, JSON-RPC (POST to the root, with or without its slash), the
REST v1.0 paths directly under it and the REST v0.3 paths under `v1/`. At an agent's own host
name the same paths sit at the host's root (a2a_platform.asgi maps them here). The platform's
own origin is the default agent's server: its well-known card, and the A2A paths of
ORIGIN_A2A_PATHS, which a2a_platform.asgi maps under the default agent's root as it maps an
agent host's; without a default agent they answer NoDefaultAgent here, in their binding's
format. An agent's OAuth 2.0 Protected Resource Metadata (RFC 9728) is at
`/.well-known/oauth-protected-resource` before the agent's path, and at that path alone on the
agent's host.
"""

import re

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.urls import include, path, re_path, register_converter
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from a2a_platform.health import healthz, readyz
from a2a_platform.metrics import metrics
from a2a_platform.versions import V0_3, V1_0
from agents.errors import NoDefaultAgent
from agents.identity import PROTECTED_RESOURCE_WELL_KNOWN
from agents.views import (
    agent_card,
    jwks,
    origin_agent_card,
    protected_resource_metadata_view,
    tenant_jwks,
)
from bindings import rest
from bindings.callbacks import webhook_callback
from bindings.errors import problem_of, rest_body
from bindings.jsonrpc import agent_jsonrpc, error_response
from console.refusals import request_refused


class TaskIdConverter:
    """A task id as it appears in a REST path: anything up to the next `/` or `:action`."""

    regex = "[^/:]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TaskIdConverter, "task")


def rest_paths(dialect: str, name: str) -> list:
    """One dialect's REST operations, named `<name>-<operation>`."""

    def view(cls: type[rest.A2AView]):  # type: ignore[no-untyped-def]
        return cls.as_view(dialect=dialect)

    paths = [
        path("message:send", view(rest.SendMessageView), name=f"{name}-send"),
        path("message:stream", view(rest.SendStreamingMessageView), name=f"{name}-stream"),
        path("tasks", view(rest.TaskListView), name=f"{name}-tasks"),
        path("tasks/<task:task_id>", view(rest.TaskView), name=f"{name}-task"),
        path("tasks/<task:task_id>:cancel", view(rest.CancelTaskView), name=f"{name}-cancel"),
        path("tasks/<task:task_id>:subscribe", view(rest.SubscribeView), name=f"{name}-subscribe"),
        path(
            "tasks/<task:task_id>/pushNotificationConfigs",
            view(rest.PushConfigsView),
            name=f"{name}-push-configs",
        ),
        path(
            "tasks/<task:task_id>/pushNotificationConfigs/<str:config_id>",
            view(rest.PushConfigView),
            name=f"{name}-push-config",
        ),
        path("extendedAgentCard", view(rest.ExtendedCardView), name=f"{name}-extended-card"),
    ]
    if dialect == V0_3:
        paths += [
            # v0.3 clients resubscribe here too, and fetch the authenticated card at v1/card.
            path(
                "tasks/<task:task_id>:resubscribe",
                view(rest.SubscribeView),
                name=f"{name}-resubscribe",
            ),
            path("card", view(rest.ExtendedCardView), name=f"{name}-card"),
        ]
    return paths


agent = "a2a/<slug:tenant_slug>/<slug:agent_slug>/"
# RFC 9728 §3.1: an agent's protected resource metadata, the well-known path before its path.
resource_metadata = PROTECTED_RESOURCE_WELL_KNOWN.lstrip("/") + "/" + agent

# The A2A paths of the platform's own origin (after its `/`): REST v0.3 under v1/, and the REST
# v1.0 paths, none of which is the platform's own. JSON-RPC is POSTed to `/` itself.
# (`[\s\S]`, not `.`: a path may hold a newline, and Django's patterns take no flags.)
ORIGIN_A2A_PATHS = r"v1/[\s\S]*|message:(?:send|stream)|tasks(?:/[\s\S]*)?|extendedAgentCard"
ORIGIN_A2A_PATH = re.compile(f"/(?:{ORIGIN_A2A_PATHS})")


@csrf_exempt
def origin_root(request: HttpRequest) -> HttpResponse:
    """The origin's `/`: the console for a person (a GET), JSON-RPC for an A2A client (a
    POST, which a2a_platform.asgi gives the default agent when there is one)."""
    if request.method == "POST":
        return error_response(NoDefaultAgent())
    return redirect("/console/")


@csrf_exempt
def origin_rest(request: HttpRequest, dialect: str) -> HttpResponse:
    """The origin's REST paths when there is no default agent to serve them."""
    problem = problem_of(NoDefaultAgent())
    return JsonResponse(rest_body(problem, dialect), status=problem.http_status)


urlpatterns = [
    # The platform's own front page is the console (it asks for a login first).
    path("", origin_root),
    path("admin/", admin.site.urls),
    path("console/", include("console.urls")),
    path("healthz", healthz),
    path("readyz", readyz),
    path("metrics", metrics),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path(".well-known/jwks.json", jwks, name="jwks"),
    path(".well-known/agent-card.json", origin_agent_card, name="origin-agent-card"),
    path(".well-known/agent.json", origin_agent_card, name="origin-agent-card-legacy"),
    path("a2a/<slug:tenant_slug>/.well-known/jwks.json", tenant_jwks, name="tenant-jwks"),
    path(resource_metadata, protected_resource_metadata_view, name="resource-metadata"),
    # Without the slash: the metadata of the agent's REST URL (the card's, which has none).
    path(resource_metadata.rstrip("/"), protected_resource_metadata_view),
    # Where `webhook` agents' services post the events of a run they accepted with 202.
    path("callbacks/<str:task_id>/", webhook_callback, name="webhook-callback"),
    path(agent + ".well-known/agent-card.json", agent_card, name="agent-card"),
    # The pre-0.3 location of the card, still fetched by older clients.
    path(agent + ".well-known/agent.json", agent_card, name="agent-card-legacy"),
    # At an agent's own host, `/.well-known/oauth-protected-resource` (a2a_platform.asgi).
    path(
        agent + PROTECTED_RESOURCE_WELL_KNOWN.lstrip("/"),
        protected_resource_metadata_view,
        name="host-resource-metadata",
    ),
    path(agent, agent_jsonrpc, name="agent-jsonrpc"),
    # Served, not redirected: clients turn a 301 of a POST into a GET.
    path(agent.rstrip("/"), agent_jsonrpc),
    path(agent + "v1/", include(rest_paths(V0_3, "rest03"))),
    path(agent, include(rest_paths(V1_0, "rest10"))),
    path(agent + "v1/<path:rest>", rest.UnknownPathView.as_view(dialect=V0_3)),
    path(agent + "<path:rest>", rest.UnknownPathView.as_view(dialect=V1_0)),
    re_path(r"^v1/", origin_rest, {"dialect": V0_3}),
    re_path(f"^(?:{ORIGIN_A2A_PATHS})$", origin_rest, {"dialect": V1_0}),
]

# A path no pattern matches under /a2a/ is answered in the REST bindings' format, not as HTML.
handler404 = "bindings.rest.not_found"


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """A request refused before any view ran (a Host the platform does not serve, a body or a
    form over a limit): under /a2a/ in the bindings' format, like the 404s; elsewhere the
    console's page naming the limit (console.refusals)."""
    if request.path.startswith("/a2a/"):
        return rest.bad_request(request, exception)
    return request_refused(request, exception)


handler400 = "a2a_platform.urls.bad_request"
