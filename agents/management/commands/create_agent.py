"""manage.py create_agent <tenant> <slug> --kind echo [--config JSON] [--secret NAME=VALUE]...
[--public] [--versions 1.0[,0.3][,0.1]] [--no-deduplicate] ..."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.cards import agent_base_url
from agents.crypto import encryption_keys_check
from agents.executors import REGISTRY
from agents.models import ALL_VERSIONS, Agent, Tenant, versions_parse, versions_validator
from agents.services import agent_create
from agents.validation import validation_summary


class Command(BaseCommand):
    help = "Register an agent for a tenant and print its card URL."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("slug")
        parser.add_argument("--kind", required=True, choices=sorted(REGISTRY))
        parser.add_argument("--config", default="{}", help="Executor config as a JSON object.")
        parser.add_argument(
            "--secret",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="An executor secret (repeatable), stored encrypted and never printed: openai's "
            "api_key, a2a-proxy's token or api_key, webhook's token, or a keyword argument "
            "NAME of a python executor's constructor. A command "
            "line is seen by other local users while it runs (and may stay in shell history).",
        )
        parser.add_argument("--name", default="")
        parser.add_argument("--description", default="")
        parser.add_argument("--skills", default="[]", help="A JSON list of AgentSkill objects.")
        parser.add_argument("--public", action="store_true", help="Allow anonymous calls.")
        parser.add_argument("--anonymous-scope", choices=["isolated", "shared"], default="isolated")
        parser.add_argument(
            "--versions",
            default=ALL_VERSIONS,
            help="The A2A versions the agent serves, comma-separated (default: "
            f"{ALL_VERSIONS}). One that serves 1.0 alone has the strict v1.0 card and refuses "
            "calls in older versions.",
        )
        parser.add_argument(
            "--no-deduplicate",
            dest="deduplicate",
            action="store_false",
            help="Every send makes a new task or turn, whatever its messageId (by default a "
            "send that repeats one gets the first send's task).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        tenant = Tenant.objects.filter(slug=options["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant {options['tenant']!r}; create it with create_tenant.")
        config, skills = _json(options, "config"), _json(options, "skills")
        secrets = _secrets(options["secret"])
        versions = _versions(options["versions"])
        try:
            agent = agent_create(
                tenant=tenant,
                slug=options["slug"],
                name=options["name"] or options["slug"],
                description=options["description"] or f"The {options['slug']} agent.",
                executor_kind=options["kind"],
                executor_config=config,
                executor_secrets=secrets,
                skills=skills,
                visibility=Agent.Visibility.PUBLIC
                if options["public"]
                else Agent.Visibility.PRIVATE,
                anonymous_scope=options["anonymous_scope"],
                protocol_versions=versions,
                deduplicate_messages=options["deduplicate"],
            )
        except ValidationError as exc:
            raise CommandError(validation_summary(exc)) from None
        self.stdout.write(f"card: {agent_base_url(agent)}.well-known/agent-card.json")
        if agent.protocol_versions != ALL_VERSIONS:
            self.stdout.write(f"serves A2A {', '.join(agent.versions)} only")
        if secrets:
            self.stdout.write(f"executor secrets stored encrypted: {', '.join(sorted(secrets))}")


def _json(options: dict[str, Any], name: str) -> Any:
    try:
        return json.loads(options[name])
    except json.JSONDecodeError as exc:
        raise CommandError(f"--{name} must be JSON: {exc}") from None
    except RecursionError:
        raise CommandError(f"--{name} must be JSON: it is nested too deeply.") from None


def _versions(value: str) -> str:
    """`--versions` as the agent stores it ("1.0,0.3", newest first)."""
    try:
        versions_validator(value)
    except ValidationError as exc:
        raise CommandError(f"--versions: {' '.join(exc.messages)}") from None
    return ",".join(versions_parse(value))


def _secrets(pairs: list[str]) -> dict[str, str]:
    secrets: dict[str, str] = {}
    for number, pair in enumerate(pairs, start=1):
        name, equals, value = pair.partition("=")
        # Messages name the secret, never quote the argument: it holds the value.
        if not equals or not name:
            raise CommandError(f"--secret #{number} must be NAME=VALUE.")
        if name in secrets:
            raise CommandError(f"--secret #{number} repeats the name of an earlier one.")
        secrets[name] = value
    return secrets
