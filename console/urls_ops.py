"""Console routes: ops pages (workers and queues, push deliveries, charts)."""

from django.urls import path

from . import views_ops

urlpatterns = [
    path("workers/", views_ops.workers, name="workers"),
    path("workers/revoke/", views_ops.job_revoke_view, name="job-revoke"),
    path("deliveries/", views_ops.deliveries, name="deliveries"),
    path("deliveries/<uuid:delivery_id>/", views_ops.delivery_detail, name="delivery"),
    path(
        "deliveries/<uuid:delivery_id>/redeliver/",
        views_ops.delivery_redeliver_view,
        name="delivery-redeliver",
    ),
    path("charts/", views_ops.charts_page, name="charts"),
]
