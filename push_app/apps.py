"""App config for push notifications: configs, the delivery outbox, Celery delivery."""

from django.apps import AppConfig


class PushAppConfig(AppConfig):
    name = "push_app"
    verbose_name = "Push notifications"

    def ready(self) -> None:
        # Tasks reach push through this seam (tasks_app.push_seam): push_app builds on
        # tasks_app, never the other way round.
        from a2a_platform.metrics import scrape_reader_register
        from tasks_app.push_seam import PushSeam, push_seam_register

        from .selectors import delivery_attempt_counts, delivery_dead_count
        from .services import push_config_set, push_outbox_add, push_url_validate

        push_seam_register(
            PushSeam(
                url_validate=push_url_validate,
                config_set=push_config_set,
                outbox_add=push_outbox_add,
            )
        )
        scrape_reader_register("delivery_attempt_counts", delivery_attempt_counts)
        scrape_reader_register("delivery_dead_count", delivery_dead_count)
