"""manage.py create_api_key <tenant> <name> [--admin] [--agent SLUG] [--principal P]"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.crypto import encryption_keys_check
from agents.models import ApiKey, Tenant
from agents.services import api_key_create
from agents.validation import validation_summary


class Command(BaseCommand):
    help = "Create an API key for a tenant; the key is printed once and never stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("name")
        parser.add_argument("--principal", default="", help="Task owner (default: the name).")
        parser.add_argument("--admin", action="store_true", help="Tenant-admin scope.")
        parser.add_argument("--agent", default="", help="Restrict the key to one agent slug.")

    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}.")
        agent = None
        if options["agent"]:
            agent = tenant.agents.filter(slug=options["agent"]).first()
            if agent is None:
                raise CommandError(f"Tenant {tenant.slug} has no agent {options['agent']!r}.")
        try:
            _, secret = api_key_create(
                tenant=tenant,
                name=options["name"],
                principal=options["principal"],
                agent=agent,
                scopes=[ApiKey.SCOPE_TENANT_ADMIN] if options["admin"] else [],
            )
        except ValidationError as exc:
            raise CommandError(validation_summary(exc)) from None
        self.stdout.write(f"api key: {secret}")
