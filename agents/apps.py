"""App config for tenants, agents and keys."""

from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from a2a_platform.metrics import scrape_reader_register

        from .usage import usage_today_totals

        scrape_reader_register("usage_today", usage_today_totals)
