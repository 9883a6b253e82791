"""manage.py create_issuer (--tenant SLUG | --platform) --issuer URL --audience AUD...
[--algorithm ALG]... [--user-claim CLAIM] [--scope OP=SCOPE]... [--jwks-uri URL] [--name NAME]
[--check]"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import IntegrityError

from agents.crypto import encryption_keys_check
from agents.models import SCOPE_OPERATIONS, TOKEN_ALGORITHMS, Tenant
from agents.services import IssuerCheckFailed, issuer_check, issuer_create
from agents.validation import validation_summary


class Command(BaseCommand):
    help = (
        "Register an OAuth 2.0 / OpenID Connect token issuer whose bearer tokens call a "
        "tenant's agents (--tenant), or every tenant's (--platform)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        whose = parser.add_mutually_exclusive_group(required=True)
        whose.add_argument("--tenant", metavar="SLUG", help="The tenant whose agents it calls.")
        whose.add_argument(
            "--platform", action="store_true", help="Platform-wide: trusted at every tenant."
        )
        parser.add_argument(
            "--issuer", required=True, metavar="URL", help="The `iss` of its tokens."
        )
        parser.add_argument(
            "--audience",
            action="append",
            required=True,
            metavar="AUD",
            help="An accepted `aud` (repeat for more), typically the agent's URL.",
        )
        parser.add_argument(
            "--algorithm",
            action="append",
            choices=TOKEN_ALGORITHMS,
            metavar="ALG",
            help=f"A signature algorithm (repeat for more; default RS256 and ES256): "
            f"{', '.join(TOKEN_ALGORITHMS)}.",
        )
        parser.add_argument(
            "--user-claim", default="sub", help="The claim that names the user (default sub)."
        )
        parser.add_argument(
            "--scope",
            action="append",
            default=[],
            metavar="OP=SCOPE",
            help=f"A scope an operation needs (repeat for more); OP is one of "
            f"{', '.join(SCOPE_OPERATIONS)}.",
        )
        parser.add_argument(
            "--jwks-uri", default="", metavar="URL", help="Its key set, without discovery."
        )
        parser.add_argument("--name", default="", help="A label (default: the issuer URL).")
        parser.add_argument(
            "--check",
            action="store_true",
            help="Then read its discovery document and key set now, and print what was found.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        tenant = None
        if options["tenant"] is not None:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
        fields: dict[str, Any] = {
            "user_claim": options["user_claim"],
            "scopes": _scopes(options["scope"]),
            "jwks_uri": options["jwks_uri"].strip(),
        }
        if options["algorithm"]:
            fields["algorithms"] = list(dict.fromkeys(options["algorithm"]))
        try:
            issuer = issuer_create(
                tenant=tenant,
                issuer=options["issuer"],
                audiences=list(dict.fromkeys(options["audience"])),
                name=options["name"],
                **fields,
            )
        except ValidationError as exc:
            # The constraints' errors are the whole row's: said without a field's name.
            raise CommandError(
                validation_summary(exc).replace(f"{NON_FIELD_ERRORS}: ", "")
            ) from None
        except IntegrityError:  # registered a moment ago by another process
            raise CommandError("This issuer is already registered there.") from None
        whose = f"tenant {tenant.slug}" if tenant is not None else "every tenant (platform-wide)"
        self.stdout.write(f"issuer {issuer.pk}: {issuer.issuer} for {whose}")
        if options["check"]:
            try:
                summary = issuer_check(issuer=issuer)
            except IssuerCheckFailed as exc:
                raise CommandError(f"Registered, but the check failed: {exc}") from None
            self.stdout.write(f"check: {summary}")


def _scopes(pairs: list[str]) -> dict[str, list[str]]:
    scopes: dict[str, list[str]] = {}
    for pair in pairs:
        operation, equals, scope = pair.partition("=")
        operation, scope = operation.strip(), scope.strip()
        if not equals or not scope:
            raise CommandError(f"--scope {pair!r}: write OP=SCOPE, e.g. send=a2a.send.")
        if operation not in SCOPE_OPERATIONS:
            raise CommandError(
                f"--scope {pair!r}: {operation!r} is not an operation (operations: "
                f"{', '.join(SCOPE_OPERATIONS)})."
            )
        if not scope.isprintable() or " " in scope:
            raise CommandError(f"--scope {pair!r}: a scope name has no spaces.")
        scopes.setdefault(operation, [])
        if scope not in scopes[operation]:
            scopes[operation].append(scope)
    return scopes
