"""Console routes: tasks pages."""

from django.urls import path

from . import views_tasks

urlpatterns = [
    path("tasks/", views_tasks.task_list, name="tasks"),
    path("t/<slug:tenant_slug>/tasks/<str:task_id>/", views_tasks.task_detail, name="task"),
    path(
        "t/<slug:tenant_slug>/tasks/<str:task_id>/events",
        views_tasks.task_events,
        name="task-events",
    ),
]
