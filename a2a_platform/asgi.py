"""ASGI entry point: daphne serves HTTP (and SSE) through Channels.

Static files (the admin's, Swagger UI's from drf-spectacular-sidecar) are served by Django's
ASGI static files handler straight from the installed apps, so the platform needs no CDN, no
`collectstatic` and no separate file server; a deployment may still put one in front.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")

django_asgi_app = get_asgi_application()

from typing import Any  # noqa: E402

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.exceptions import SuspiciousOperation  # noqa: E402
from django.http import HttpResponseNotFound  # noqa: E402


class StaticFiles(ASGIStaticFilesHandler):
    """Django's handler, answering a path that tries to leave the static folders (`..`) with
    404 instead of a 500, and with `nosniff` like the rest of the site."""

    async def get_response_async(self, request: Any) -> Any:
        try:
            response = await super().get_response_async(request)
        except SuspiciousOperation:
            response = HttpResponseNotFound("Not found.", content_type="text/plain")
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        return response


application = ProtocolTypeRouter({"http": StaticFiles(django_asgi_app)})
