"""Console routes: a tenant's token issuers (OAuth 2.0 / OpenID Connect providers)."""

from django.urls import path

from . import views_identity

urlpatterns = [
    path("t/<slug:tenant_slug>/issuers/", views_identity.issuers, name="issuers"),
    path("t/<slug:tenant_slug>/issuers/new/", views_identity.issuer_new, name="issuer-new"),
    path(
        "t/<slug:tenant_slug>/issuers/<int:issuer_id>/edit/",
        views_identity.issuer_edit,
        name="issuer-edit",
    ),
    path(
        "t/<slug:tenant_slug>/issuers/<int:issuer_id>/active/",
        views_identity.issuer_active,
        name="issuer-active",
    ),
    path(
        "t/<slug:tenant_slug>/issuers/<int:issuer_id>/delete/",
        views_identity.issuer_delete_view,
        name="issuer-delete",
    ),
    path(
        "t/<slug:tenant_slug>/issuers/<int:issuer_id>/check/",
        views_identity.issuer_check_view,
        name="issuer-check",
    ),
]
