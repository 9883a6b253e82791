"""Console routes: tasks pages."""

urlpatterns: list = []
