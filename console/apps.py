from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console (dashboards)"
    default_auto_field = "django.db.models.BigAutoField"
