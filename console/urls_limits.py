"""Console route: a tenant's limits (docs/plans.md)."""

from django.urls import path

from . import views_limits

urlpatterns = [
    path("t/<slug:tenant_slug>/limits/", views_limits.limits, name="limits"),
]
