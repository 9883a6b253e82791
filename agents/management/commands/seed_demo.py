"""manage.py seed_demo: the demo tenant, its agents, its API key and console logins
(idempotent; the console passwords are new on each run).

The demo's API key stays the same from run to run while it is valid: its secret is kept in the
var dir (`demo_api_keys/<tenant>`, mode 0600, beside `secret_key`) when the var dir's key is the
key in use (the embedded profile, and `make run` on any profile), and is printed again. A key
revoked or deleted meanwhile, or a kept secret that no longer matches it, is replaced by a new
one; `--new-key` replaces it in any case. Elsewhere (a production profile, whose key is its
own) no secret is written to disk: the first run prints a new key, and later runs say that the
key is kept and print only its prefix. Keys are stored hashed, so no run can show an old one.

`conformance`, the agent the A2A TCK is run against, does not de-duplicate messageIds (the kit
reuses them: docs/conformance.md); every run sets that again on an existing one.

Beside `echo` and `conformance`: `echo-proxy`, an `a2a-proxy` agent that fronts `echo` through
the platform's own public URL (so the SSRF guard must let agents reach it: `make run`
allowlists loopback), with a key of its own for echo, kept in its encrypted secrets and
replaced only when it no longer works; and, when OPENAI_API_KEY or OPENAI_BASE_URL is set,
`assistant`, an `openai` agent on that endpoint (OPENAI_MODEL, default gpt-4o-mini).

Two plans to start from, `free` and `standard` (docs/plans.md), made when missing and never
changed afterwards (the operator's edits in the admin stay). The demo tenant is given neither:
without a plan it has the operator's default plan (A2A_DEFAULT_PLAN), and with none set, no
limits, so `make run` and the TCK run unlimited.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from a2a_platform.secret_key import var_key_in_use, var_secret_keep, var_secret_read
from agents import plans
from agents.auth import hash_secret, key_prefix
from agents.cards import agent_base_url
from agents.crypto import DecryptionFailed, encryption_keys_check
from agents.executors.secrets import executor_secrets_open
from agents.models import Agent, ApiKey, Membership, Plan, Tenant
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
        # The TCK reuses one messageId per kind of message for its whole session: each of its
        # sends must be a new one (docs/conformance.md).
        "deduplicate_messages": False,
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

# The fields of a demo agent that every run sets again as DEMO_AGENTS says.
KEPT = ("deduplicate_messages",)

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

# Starting points for an operator's plans; 0 is unlimited. `free` lets one person try agents
# (a few calls a second, two runs at once, a daily quota); `standard` carries a team's
# production traffic and gets twice free's share of the workers when tenants wait together.
DEMO_PLANS: list[dict[str, Any]] = [
    {
        "name": "free",
        "description": "To try agents: a few calls a second, two runs at once, 500 runs a day.",
        "weight": 1,
        "requests_per_second": 5,
        "request_burst": 20,
        "running_runs": 2,
        "queued_runs": 50,
        "runs_per_day": 500,
        "runs_per_month": 5_000,
        "stored_tasks": 5_000,
    },
    {
        "name": "standard",
        "description": "For production traffic: 50 calls a second, 20 runs at once.",
        "weight": 2,
        "requests_per_second": 50,
        "request_burst": 200,
        "running_runs": 20,
        "queued_runs": 1_000,
        "runs_per_month": 500_000,
        "stored_tasks": 500_000,
    },
]


class Command(BaseCommand):
    help = (
        "Create the demo tenant and agents if missing, and print the demo's API key (the same "
        "while it is valid) and new console passwords."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--tenant", default="demo")
        parser.add_argument(
            "--new-key",
            action="store_true",
            help="Revoke the demo's API key and print a new one, even while it is valid.",
        )

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
            self._kept(agent, spec)
            self._card(agent)
        self._proxy(tenant)
        self._assistant(tenant)
        self.stdout.write(self._plans(tenant))
        self.stdout.write(self._demo_key(tenant, renew=options["new_key"]))
        operator = self._login("operator", is_staff=True, is_superuser=True)
        owner = self._login(f"{tenant.slug}-owner")
        Membership.objects.update_or_create(
            user=owner[0], tenant=tenant, defaults={"role": Membership.Role.OWNER}
        )
        for (user, password), what in ((operator, "operator"), (owner, f"owner of {tenant.slug}")):
            self.stdout.write(f"console login ({what}): {user.username} / {password}")

    def _kept(self, agent: Agent, spec: dict[str, Any]) -> None:
        """An existing demo agent gets again the settings its purpose needs (KEPT: the
        conformance agent made before it had `deduplicate_messages`); the rest of it is the
        operator's."""
        fields = [f for f in KEPT if f in spec and getattr(agent, f) != spec[f]]
        for name in fields:
            setattr(agent, name, spec[name])
        if fields:
            agent_update(agent=agent, fields=fields)

    def _plans(self, tenant: Tenant) -> str:
        """The starting plans, made when missing; the line that says what limits the demo."""
        for spec in DEMO_PLANS:
            Plan.objects.get_or_create(name=spec["name"], defaults=spec)
        names = ", ".join(Plan.objects.order_by("name").values_list("name", flat=True))
        if tenant.plan is not None:
            has = f"plan {tenant.plan.name}"
        elif (default := plans.default_plan_name()) and Plan.objects.filter(name=default).exists():
            has = f"the default plan {default} (A2A_DEFAULT_PLAN)"
        else:
            has = "no plan: nothing limits it"
        return f"plans: {names} (admin > Plans); {tenant.slug} has {has}"

    def _card(self, agent: Agent) -> None:
        self.stdout.write(
            f"agent card ({agent.tenant.slug}/{agent.slug}): "
            f"{agent_base_url(agent)}.well-known/agent-card.json"
        )

    def _demo_key(self, tenant: Tenant, *, renew: bool) -> str:
        """The line that gives the demo's key: the one kept while it is valid, else a new one
        (the others of its name revoked: one demo key at a time)."""
        line = f"API key ({tenant.slug}): "
        kept_in = demo_key_file(tenant)
        if kept_in is not None and not renew:
            secret = var_secret_read(kept_in)
            key = valid_key(tenant=tenant, name="demo", secret=secret, agent=None)
            if key is not None:
                keys_revoke(tenant=tenant, name="demo", keep=key)
                return line + secret
        if kept_in is None and not renew:
            # Nowhere to keep a secret: the key stays, though its secret cannot be shown.
            current = (
                ApiKey.objects.filter(tenant=tenant, name="demo", revoked_at__isnull=True)
                .order_by("-created_at")
                .first()
            )
            if current is not None:
                return (
                    f"{line}a2a_{current.prefix}_... (kept; issued "
                    f"{current.created_at:%Y-%m-%d %H:%M} UTC, its secret printed then and not "
                    "stored: `manage.py seed_demo --new-key` replaces it)"
                )
        keys_revoke(tenant=tenant, name="demo")
        _, secret = api_key_create(tenant=tenant, name="demo", principal="demo")
        if kept_in is not None:
            try:
                var_secret_keep(kept_in, secret)
            except OSError as exc:
                raise CommandError(
                    f"Cannot keep the demo's API key in {kept_in}: {exc.strerror or exc}."
                ) from None
        return line + secret

    def _proxy(self, tenant: Tenant) -> None:
        """echo-proxy, with a key of its own for echo: the one in its secrets while it is
        valid, else a new one."""
        echo = tenant.agents.get(slug="echo")
        config = {"card_url": f"{agent_base_url(echo)}.well-known/agent-card.json"}
        agent = tenant.agents.filter(slug=PROXY["slug"]).first()
        try:
            with transaction.atomic():  # a refused agent leaves no key behind
                if agent is None:
                    agent = agent_create(
                        tenant=tenant,
                        **PROXY,
                        executor_config=config,
                        executor_secrets={"api_key": self._proxy_key_new(tenant, echo)},
                    )
                elif not self._proxy_key_works(agent, echo):
                    key = self._proxy_key_new(tenant, echo)
                    agent_secrets_set(agent=agent, secrets={"api_key": key})
        except ValidationError as exc:  # the guard refuses this platform's own URL
            self.stdout.write(
                f"{tenant.slug}/{PROXY['slug']} not created: {validation_summary(exc)}"
            )
            return
        self._card(agent)

    def _proxy_key_works(self, proxy: Agent, echo: Agent) -> bool:
        try:
            secret = executor_secrets_open(proxy.executor_secrets_encrypted).get("api_key", "")
        except DecryptionFailed:
            return False
        key = valid_key(tenant=proxy.tenant, name=PROXY["slug"], secret=secret, agent=echo)
        return key is not None

    def _proxy_key_new(self, tenant: Tenant, echo: Agent) -> str:
        keys_revoke(tenant=tenant, name=PROXY["slug"])
        _, key = api_key_create(
            tenant=tenant, name=PROXY["slug"], principal="echo-proxy", agent=echo
        )
        return key

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


def demo_key_file(tenant: Tenant) -> Path | None:
    """Where the tenant's demo key is kept: in the var dir, when its key is the key in use
    (a2a_platform.secret_key); None elsewhere."""
    if not var_key_in_use(settings.VAR_DIR, settings.SECRET_KEY):
        return None
    return settings.VAR_DIR / "demo_api_keys" / tenant.slug


def valid_key(*, tenant: Tenant, name: str, secret: str, agent: Agent | None) -> ApiKey | None:
    """The tenant's unrevoked key `name` (for `agent`, or for every agent when None) whose
    secret is `secret`, if there is one."""
    prefix = key_prefix(secret)
    if not prefix:
        return None
    key = ApiKey.objects.filter(
        tenant=tenant, name=name, prefix=prefix, agent=agent, revoked_at__isnull=True
    ).first()
    if key is None or not hmac.compare_digest(key.secret_hash, hash_secret(secret)):
        return None
    return key


def keys_revoke(*, tenant: Tenant, name: str, keep: ApiKey | None = None) -> None:
    """Revoke the tenant's keys `name`, but `keep`: their secrets cannot be shown again. Each
    key is saved on its own, so the audit log records each revocation."""
    keys = ApiKey.objects.filter(tenant=tenant, name=name, revoked_at__isnull=True)
    if keep is not None:
        keys = keys.exclude(pk=keep.pk)
    now = timezone.now()
    for key in keys:
        key.revoked_at = now
        key.save(update_fields=["revoked_at"])
