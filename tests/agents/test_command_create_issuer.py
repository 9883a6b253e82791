"""manage.py create_issuer: a tenant's issuer or a platform-wide one, with its audiences,
algorithms, user claim and scopes per operation; `--check` reads its documents now (against a
real local OpenID provider, tests/e2e/oidc_provider.py); every mistake is one clear line."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import CommandError, call_command

from agents.models import Issuer
from tests.e2e.oidc_provider import Provider

IDP = "https://login.example.com/realms/acme"


def run(*arguments: str) -> str:
    out = io.StringIO()
    call_command("create_issuer", *arguments, stdout=out)
    return out.getvalue()


def test_a_tenants_issuer_with_everything_it_takes(make_tenant):
    tenant = make_tenant()
    out = run(
        "--tenant", tenant.slug,
        "--issuer", IDP,
        "--audience", "https://agents.example.com/a2a/acme/helper/",
        "--audience", "api://agents",
        "--algorithm", "ES256",
        "--algorithm", "PS256",
        "--user-claim", "email",
        "--scope", "send=a2a.send",
        "--scope", "send=a2a.write",
        "--scope", "read=a2a.read",
        "--name", "Acme staff",
    )  # fmt: skip
    issuer = Issuer.objects.get(tenant=tenant)
    assert out == f"issuer {issuer.pk}: {IDP} for tenant {tenant.slug}\n"
    assert issuer.name == "Acme staff" and issuer.user_claim == "email"
    assert issuer.audiences == ["https://agents.example.com/a2a/acme/helper/", "api://agents"]
    assert issuer.algorithms == ["ES256", "PS256"]
    assert issuer.scopes == {"send": ["a2a.send", "a2a.write"], "read": ["a2a.read"]}


def test_a_platform_wide_issuer_with_the_defaults(db):
    out = run("--platform", "--issuer", IDP, "--audience", "api://agents")
    issuer = Issuer.objects.get(tenant__isnull=True)
    assert out.endswith(f"{IDP} for every tenant (platform-wide)\n")
    assert issuer.algorithms == ["RS256", "ES256"] and issuer.user_claim == "sub"
    assert issuer.scopes == {} and issuer.name == IDP and issuer.jwks_uri == ""


@pytest.mark.parametrize(
    "arguments, words",
    [
        (["--tenant", "nobody", "--issuer", IDP, "--audience", "a"], "No tenant 'nobody'."),
        (
            ["--platform", "--issuer", IDP, "--audience", "a", "--scope", "write=x"],
            "'write' is not an operation (operations: send, read, cancel, push)",
        ),
        (
            ["--platform", "--issuer", IDP, "--audience", "a", "--scope", "send"],
            "write OP=SCOPE, e.g. send=a2a.send",
        ),
        (["--platform", "--issuer", "not a url", "--audience", "a"], "issuer: Enter a valid URL."),
        (
            ["--platform", "--issuer", IDP, "--audience", " "],
            "audiences: List at least one accepted audience",
        ),
        (
            ["--platform", "--issuer", IDP, "--audience", "a", "--jwks-uri", "keys"],
            "jwks_uri: Enter a valid URL.",
        ),
    ],
)
def test_mistakes_are_one_clear_line_and_nothing_is_stored(db, arguments, words):
    with pytest.raises(CommandError) as refused:
        run(*arguments)
    assert words in str(refused.value)
    assert not Issuer.objects.exists()


def test_one_issuer_is_registered_once_per_tenant(make_tenant):
    tenant = make_tenant()
    run("--tenant", tenant.slug, "--issuer", IDP, "--audience", "a")
    with pytest.raises(CommandError, match="^This issuer is already registered for the tenant"):
        run("--tenant", tenant.slug, "--issuer", IDP, "--audience", "a")


def test_the_parser_refuses_what_it_cannot_take(db):
    for arguments in (
        ["--issuer", IDP, "--audience", "a"],  # neither --tenant nor --platform
        ["--tenant", "t", "--platform", "--issuer", IDP, "--audience", "a"],
        ["--platform", "--issuer", IDP, "--audience", "a", "--algorithm", "HS256"],
        ["--platform", "--issuer", IDP],  # no audience
    ):
        with pytest.raises(CommandError):
            run(*arguments)


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    provider = Provider()
    yield provider
    provider.stop()


def test_check_prints_what_a_token_would_meet(make_tenant, provider, settings):
    settings.A2A_IDENTITY_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    tenant = make_tenant()
    out = run("--tenant", tenant.slug, "--issuer", provider.issuer, "--audience", "a", "--check")
    assert out.splitlines()[1] == (
        f"check: 2 keys: RS256, ES256; token endpoint {provider.issuer}/token"
    )
    assert Issuer.objects.get(tenant=tenant).discovered["jwks_uri"] == f"{provider.issuer}/keys"


def test_a_failed_check_says_the_issuer_is_registered_and_what_failed(make_tenant, provider):
    tenant = make_tenant()
    with pytest.raises(CommandError) as failed:
        run("--tenant", tenant.slug, "--issuer", provider.issuer, "--audience", "a", "--check")
    assert str(failed.value).startswith("Registered, but the check failed: Discovery document: ")
    assert "a loopback address" in str(failed.value)
    assert Issuer.objects.filter(tenant=tenant).exists()
