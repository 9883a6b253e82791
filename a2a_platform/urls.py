"""Root URLs: the admin, and every hosted agent under /a2a/<tenant>/<agent>/."""

from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import path

from agents.views import agent_card
from tasks_app.jsonrpc import agent_jsonrpc


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


agent = "a2a/<slug:tenant_slug>/<slug:agent_slug>/"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz),
    path(agent + ".well-known/agent-card.json", agent_card, name="agent-card"),
    # The pre-0.3 location of the card, still fetched by older clients.
    path(agent + ".well-known/agent.json", agent_card, name="agent-card-legacy"),
    path(agent, agent_jsonrpc, name="agent-jsonrpc"),
]
