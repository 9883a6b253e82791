"""App config for push notifications: configs, the delivery outbox, Celery delivery."""

from django.apps import AppConfig


class PushAppConfig(AppConfig):
    name = "push_app"
    verbose_name = "Push notifications"
