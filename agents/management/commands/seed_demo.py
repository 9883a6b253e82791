"""manage.py seed_demo: the demo tenant, its agents, a fresh API key and console logins
(idempotent; each run issues new secrets, since old ones cannot be shown again).

Beside `echo` and `conformance`: `echo-proxy`, an `a2a-proxy` agent that fronts `echo` through
the platform's own public URL (so the SSRF guard must let agents reach it: `make run`
allowlists loopback), and, when OPENAI_API_KEY or OPENAI_BASE_URL is set, `assistant`, an
`openai` agent on that endpoint (OPENAI_MODEL, default gpt-4o-mini).
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand
from django.db import transaction
from django.utils import timezone

from agents.cards import agent_base_url
from agents.crypto import encryption_keys_check
from agents.models import Agent, ApiKey, Membership, Tenant
from agents.services import (
    agent_create,
    agent_secrets_set,
    agent_update,
    api_key_create,
    tenant_create,
)
from agents.validation import agent_validate, validation_summary

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


PROXY = {
    "slug": "echo-proxy",
    "name": "Echo, through a proxy",
    "description": "An a2a-proxy agent: every message goes on to demo/echo over A2A.",
    "executor_kind": "a2a-proxy",
    "visibility": Agent.Visibility.PRIVATE,
}
ASSISTANT = {
    "slug": "assistant",
    "name": "Assistant",
    "description": "A model behind an OpenAI-compatible chat-completions endpoint.",
    "executor_kind": "openai",
    "visibility": Agent.Visibility.PRIVATE,
}
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
OPENAI_DEFAULT_MODEL = "gpt-4o-mini"


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
            self._card(agent)
        self._proxy(tenant)
        self._assistant(tenant)
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

    def _card(self, agent: Agent) -> None:
        self.stdout.write(
            f"agent card ({agent.tenant.slug}/{agent.slug}): "
            f"{agent_base_url(agent)}.well-known/agent-card.json"
        )

    def _proxy(self, tenant: Tenant) -> None:
        """echo-proxy, with a key of its own for echo (issued anew each run, as the demo's)."""
        echo = tenant.agents.get(slug="echo")
        config = {"card_url": f"{agent_base_url(echo)}.well-known/agent-card.json"}
        ApiKey.objects.filter(tenant=tenant, name=PROXY["slug"], revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        _, key = api_key_create(
            tenant=tenant, name=PROXY["slug"], principal="echo-proxy", agent=echo
        )
        agent = tenant.agents.filter(slug=PROXY["slug"]).first()
        try:
            with transaction.atomic():
                if agent is None:
                    agent = agent_create(
                        tenant=tenant,
                        **PROXY,
                        executor_config=config,
                        executor_secrets={"api_key": key},
                    )
                else:
                    agent_secrets_set(agent=agent, secrets={"api_key": key})
        except ValidationError as exc:  # the guard refuses this platform's own URL
            self.stdout.write(
                f"{tenant.slug}/{PROXY['slug']} not created: {validation_summary(exc)}"
            )
            return
        self._card(agent)

    def _assistant(self, tenant: Tenant) -> None:
        """assistant, when the environment names an OpenAI-compatible endpoint."""
        api_key = os.environ.get("OPENAI_API_KEY", "")
        base_url = os.environ.get("OPENAI_BASE_URL", "")
        if not (api_key or base_url):
            self.stdout.write(
                f"{tenant.slug}/{ASSISTANT['slug']} (an openai agent): set OPENAI_API_KEY (and "
                "OPENAI_BASE_URL, OPENAI_MODEL for another endpoint) to add it."
            )
            return
        config = {
            "base_url": base_url or OPENAI_DEFAULT_BASE_URL,
            "model": os.environ.get("OPENAI_MODEL", "") or OPENAI_DEFAULT_MODEL,
        }
        secrets = {"api_key": api_key} if api_key else {}
        agent = tenant.agents.filter(slug=ASSISTANT["slug"]).first()
        try:
            with transaction.atomic():
                if agent is None:
                    agent = agent_create(
                        tenant=tenant, **ASSISTANT, executor_config=config, executor_secrets=secrets
                    )
                else:  # the environment may name another endpoint this time; its tasks stay
                    agent.executor_config = config
                    agent_validate(agent, secret_names=secrets)
                    agent_update(agent=agent, fields=["executor_config"])
                    agent_secrets_set(agent=agent, secrets=secrets)
        except ValidationError as exc:
            self.stdout.write(
                f"{tenant.slug}/{ASSISTANT['slug']} not created: {validation_summary(exc)}"
            )
            return
        self._card(agent)

    def _login(self, username: str, **flags: bool) -> tuple[Any, str]:
        user, _ = get_user_model().objects.get_or_create(username=username)
        password = secrets.token_urlsafe(12)
        user.set_password(password)
        user.is_active = True
        for flag in ("is_staff", "is_superuser"):
            setattr(user, flag, flags.get(flag, False))  # what the printed line says it is
        user.save()
        return user, password
