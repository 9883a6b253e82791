"""App config for tasks and the A2A services."""

from django.apps import AppConfig


class TasksAppConfig(AppConfig):
    name = "tasks_app"
    verbose_name = "Tasks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from a2a_platform.metrics import scrape_reader_register

        from .selectors import task_counts_by_agent

        scrape_reader_register("task_counts_by_agent", task_counts_by_agent)
