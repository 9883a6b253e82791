"""manage.py create_tenant <slug> [--name NAME]"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.crypto import encryption_keys_check
from agents.services import tenant_create
from agents.validation import validation_summary


class Command(BaseCommand):
    help = "Create a tenant."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        try:
            tenant = tenant_create(slug=options["slug"], name=options["name"])
        except ValidationError as exc:
            raise CommandError(validation_summary(exc)) from None
        self.stdout.write(f"tenant {tenant.slug} created")
