"""The Django project of the A2A hosting platform."""

from .celery import app as celery_app

__all__ = ["celery_app"]
