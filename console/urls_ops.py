"""Console routes: ops pages."""

urlpatterns: list = []
