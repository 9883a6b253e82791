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

from channels.routing import ProtocolTypeRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

application = ProtocolTypeRouter({"http": ASGIStaticFilesHandler(django_asgi_app)})
