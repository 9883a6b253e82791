"""The console under /console/. Page groups keep their routes in their own modules."""

from django.contrib.auth import views as auth_views
from django.urls import include, path

from . import views

app_name = "console"

urlpatterns = [
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="console/login.html"),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.overview, name="overview"),
    path("t/<slug:tenant_slug>/agents/new/", views.agent_new, name="agent-new"),
    # "Test connection": for a new agent (the tenant's), and for an existing one (its secrets).
    path(
        "t/<slug:tenant_slug>/agents/test-connection/",
        views.agent_test_connection,
        name="agent-test-connection",
    ),
    path("t/<slug:tenant_slug>/a/<slug:agent_slug>/", views.agent_detail, name="agent"),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/test-connection/",
        views.agent_test_connection,
        name="agent-test-connection",
    ),
    path("t/<slug:tenant_slug>/a/<slug:agent_slug>/edit/", views.agent_edit, name="agent-edit"),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/active/",
        views.agent_active,
        name="agent-active",
    ),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/delete/",
        views.agent_delete_view,
        name="agent-delete",
    ),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/keys/new/",
        views.key_create,
        name="key-create",
    ),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/keys/<slug:prefix>/revoke/",
        views.key_revoke,
        name="key-revoke",
    ),
    path("", include("console.urls_tasks")),
    path("", include("console.urls_actions")),
    path("", include("console.urls_people")),
    path("", include("console.urls_ops")),
    path("", include("console.urls_limits")),
    path("", include("console.urls_usage")),
    path("", include("console.urls_identity")),
    path("", include("console.urls_audit")),
]
