"""Console routes: a tenant's usage page and its exports (CSV and JSON)."""

from django.urls import path

from . import views_usage

urlpatterns = [
    path("usage/", views_usage.usage_page, name="usage-index"),
    path("t/<slug:tenant_slug>/usage/", views_usage.usage_page, name="usage"),
    path("t/<slug:tenant_slug>/usage.csv", views_usage.usage_csv, name="usage-csv"),
    path("t/<slug:tenant_slug>/usage.json", views_usage.usage_json, name="usage-json"),
]
