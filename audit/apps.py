"""App config of the audit log: its receivers on the watched models, the management commands'
actor, and failed logins counted."""

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_login_failed

        from .capture import capture_connect
        from .context import commands_audited
        from .failures import login_failed

        capture_connect()
        commands_audited()
        user_login_failed.connect(login_failed, dispatch_uid="audit-login-failed")
