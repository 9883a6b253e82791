"""Console routes: acting as the person logged in (Cancel and Reply on a task, Try it on an
agent); POSTs with the session's CSRF token."""

from django.urls import path

from . import views_actions

urlpatterns = [
    path(
        "t/<slug:tenant_slug>/tasks/<str:task_id>/cancel/",
        views_actions.task_cancel_view,
        name="task-cancel",
    ),
    path(
        "t/<slug:tenant_slug>/tasks/<str:task_id>/reply/",
        views_actions.task_reply_view,
        name="task-reply",
    ),
    path(
        "t/<slug:tenant_slug>/a/<slug:agent_slug>/try/",
        views_actions.agent_try_view,
        name="agent-try",
    ),
]
