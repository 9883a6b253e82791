"""Console routes: the people of a tenant, and the page an invited person sets a password on."""

from django.contrib.auth import views as auth_views
from django.urls import path, reverse_lazy

from . import views_people

urlpatterns = [
    path("t/<slug:tenant_slug>/people/", views_people.people, name="people"),
    path("t/<slug:tenant_slug>/people/add/", views_people.person_add, name="person-add"),
    path(
        "t/<slug:tenant_slug>/people/<int:membership_id>/role/",
        views_people.person_role,
        name="person-role",
    ),
    path(
        "t/<slug:tenant_slug>/people/<int:membership_id>/remove/",
        views_people.person_remove,
        name="person-remove",
    ),
    path(
        "welcome/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(
            template_name="console/welcome.html",
            success_url=reverse_lazy("console:login"),
            post_reset_login=False,
        ),
        name="welcome",
    ),
]
