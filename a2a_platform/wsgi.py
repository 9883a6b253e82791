"""WSGI entry point, for management tooling only; the platform is served over ASGI."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")
application = get_wsgi_application()
