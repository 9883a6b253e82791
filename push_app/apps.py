"""App config for push notifications (configs, outbox, delivery): models arrive with that issue."""

from django.apps import AppConfig


class PushAppConfig(AppConfig):
    name = "push_app"
