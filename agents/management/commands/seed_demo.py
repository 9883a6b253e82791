"""manage.py seed_demo: the demo tenant, its agents, a fresh API key and console logins
(idempotent; each run issues new secrets, since old ones cannot be shown again)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from agents.cards import agent_base_url
from agents.crypto import encryption_keys_check
from agents.models import Agent, ApiKey, Membership, Tenant
from agents.services import agent_create, api_key_create, tenant_create

DEMO_AGENTS: list[dict[str, Any]] = [
    {
        "slug": "echo",
        "name": "Echo",
        "description": "Echoes your text back as an artifact.",
        "executor_kind": "echo",
        "visibility": Agent.Visibility.PRIVATE,
        "skills": [
            {
                "id": "echo",
                "name": "Echo",
                "description": "Repeats what you send.",
                "tags": ["demo"],
                "examples": ["hello"],
            }
        ],
    },
    {
        "slug": "conformance",
        "name": "Conformance",
        "description": "Answers the A2A TCK's scenarios; anonymous callers share one scope.",
        "executor_kind": "conformance",
        "visibility": Agent.Visibility.PUBLIC,
        "anonymous_scope": Agent.AnonymousScope.SHARED,
        "skills": [
            {
                "id": "tck",
                "name": "TCK scenarios",
                "description": "Deterministic behaviour keyed on the messageId prefix.",
                "tags": ["conformance"],
            }
        ],
    },
]


class Command(BaseCommand):
    help = "Create the demo tenant and agents if missing, and print a new demo API key."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", default="demo")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        tenant = Tenant.objects.filter(slug=options["tenant"]).first() or tenant_create(
            slug=options["tenant"], name="Demo"
        )
        for spec in DEMO_AGENTS:
            agent = tenant.agents.filter(slug=spec["slug"]).first() or agent_create(
                tenant=tenant, **spec
            )
            self.stdout.write(
                f"agent card ({tenant.slug}/{agent.slug}): "
                f"{agent_base_url(agent)}.well-known/agent-card.json"
            )
        # The secret of an old key cannot be shown again, so each run issues a new one.
        ApiKey.objects.filter(tenant=tenant, name="demo", revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        _, secret = api_key_create(tenant=tenant, name="demo", principal="demo")
        self.stdout.write(f"API key ({tenant.slug}): {secret}")
        operator = self._login("operator", is_staff=True, is_superuser=True)
        owner = self._login(f"{tenant.slug}-owner")
        Membership.objects.update_or_create(
            user=owner[0], tenant=tenant, defaults={"role": Membership.Role.OWNER}
        )
        for (user, password), what in ((operator, "operator"), (owner, f"owner of {tenant.slug}")):
            self.stdout.write(f"console login ({what}): {user.username} / {password}")

    def _login(self, username: str, **flags: bool) -> tuple[Any, str]:
        user, _ = get_user_model().objects.get_or_create(username=username)
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.is_active = True
        for flag in ("is_staff", "is_superuser"):
            setattr(user, flag, flags.get(flag, False))  # what the printed line says it is
        user.save()
        return user, password
