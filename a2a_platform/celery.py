"""The Celery application shared by workers and beat."""

from __future__ import annotations

import os
import sys
from typing import Any

from celery import Celery
from celery.signals import beat_init, setup_logging
from django.core.exceptions import ImproperlyConfigured

from .broker import install as install_broker_transports

install_broker_transports()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "a2a_platform.settings")

app = Celery("a2a_platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def _stop(exc: ImproperlyConfigured) -> None:
    """A setting that is missing or wrong, said in one line (as manage.py says it)."""
    print(f"ImproperlyConfigured: {exc}", file=sys.stderr, flush=True)
    raise SystemExit(1)  # not an Exception: Celery's signal dispatch would log and go on


@app.on_configure.connect
def _settings_load(**_: Any) -> None:
    # `celery -A a2a_platform ...` reads the settings on first use of the configuration; a
    # missing secret key would end in a traceback from inside Celery's option parsing.
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 (loads the settings module)
    except ImproperlyConfigured as exc:
        _stop(exc)


@setup_logging.connect
def _logging_as_configured(**_: Any) -> None:
    """Celery configures no logging of its own when this signal has a receiver: django.setup(),
    which Celery's Django fixup runs in workers and beat before this point, has applied
    settings.LOGGING, so LOG_LEVEL, the format and the filters are the same in every process
    (Celery's own --loglevel and format settings are not used)."""


@beat_init.connect
def _beat_keys_check(**_: Any) -> None:
    # Every process of the platform refuses to start with keys that cannot read the stored
    # secrets (agents.crypto.encryption_keys_check); beat's entry point is Celery's.
    from agents.crypto import encryption_keys_check

    try:
        encryption_keys_check()
    except ImproperlyConfigured as exc:
        _stop(exc)
