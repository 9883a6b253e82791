"""The Celery application shared by workers and beat."""

from __future__ import annotations

import os

from celery import Celery

from .broker import install as install_broker_transports

install_broker_transports()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")

app = Celery("a2a_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
