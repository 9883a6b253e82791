from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console (dashboards)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connects the Celery task_failure receiver in every process that loads Django,
        # workers included (they set Django up before running a job).
        # The same for the per-kind job counters and the inspect command that reads them.
        from . import jobstats, signals  # noqa: F401
