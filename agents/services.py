"""Writes for tenants, agents and keys. Each service validates fully and owns its transaction."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from jwt.algorithms import ECAlgorithm

from a2a_platform import ssrf
from tasks_app.models import RUNNING_STATES

from . import crypto, identity
from .auth import hash_secret, new_key_material
from .errors import IssuerUnavailable
from .executors import (
    executor_arguments_check,
    executor_config_validate,
    executor_secrets_check,
)
from .executors.secrets import executor_secrets_seal, executor_secrets_validate
from .models import Agent, ApiKey, Issuer, Membership, SigningKey, Tenant
from .validation import agent_fields_check, agent_validate


@transaction.atomic
def tenant_create(*, slug: str, name: str = "") -> Tenant:
    tenant = Tenant(slug=slug, name=name or slug)
    tenant.full_clean()
    tenant.save()
    return tenant


def issuer_create(
    *,
    tenant: Tenant | None,
    issuer: str,
    audiences: list[str],
    name: str = "",
    **fields: Any,
) -> Issuer:
    """Register a token issuer for `tenant` (None: platform-wide). Its discovery document is
    read at the first token it signs (agents.identity), not here."""
    row = Issuer(
        tenant=tenant,
        issuer=issuer.strip(),
        audiences=audiences,
        name=name or issuer.strip(),
        **fields,
    )
    row.full_clean()
    row.save()
    return row


# What of an issuer its people change (issuer_update); `discovered` is the platform's.
ISSUER_FIELDS = ("name", "issuer", "jwks_uri", "audiences", "algorithms", "user_claim", "scopes")


@transaction.atomic
def issuer_update(*, issuer: Issuer, fields: Mapping[str, Any]) -> Issuer:
    """Change the issuer's registration (ISSUER_FIELDS), checked as on creation; raises
    ValidationError before anything is written. A new issuer URL or jwks_uri drops what
    discovery said: it was said of the old one. Tokens follow within A2A_AUTH_CACHE_SECONDS
    (agents.cache.issuers_load)."""
    unknown = sorted(set(fields) - set(ISSUER_FIELDS))
    if unknown:
        raise ValueError(f"Not a field of an issuer's registration: {', '.join(unknown)}.")
    Issuer.objects.select_for_update().filter(pk=issuer.pk).first()
    before = (issuer.issuer, issuer.jwks_uri)
    for name, value in fields.items():
        if name in ("issuer", "jwks_uri") and isinstance(value, str):
            value = value.strip()
        setattr(issuer, name, value)
    if not issuer.name.strip():
        issuer.name = issuer.issuer
    changed = ["updated_at", *fields]
    if (issuer.issuer, issuer.jwks_uri) != before:
        issuer.discovered = {}
        changed.append("discovered")
    issuer.full_clean()
    issuer.save(update_fields=changed)
    return issuer


@transaction.atomic
def issuer_set_active(*, issuer: Issuer, active: bool) -> Issuer:
    """Stop (or start again) accepting the issuer's tokens, within A2A_AUTH_CACHE_SECONDS on
    every process; the tasks its users own stay theirs."""
    issuer.is_active = active
    issuer.save(update_fields=["is_active", "updated_at"])
    return issuer


@transaction.atomic
def issuer_delete(*, issuer: Issuer) -> None:
    """Forget the issuer. Its users' tasks stay (their owner names the issuer URL, not the row:
    agents.identity.owner_of), and are theirs again if the issuer is registered again."""
    Issuer.objects.filter(pk=issuer.pk).delete()


class IssuerCheckFailed(ValueError):
    """An issuer's discovery document or key set is not what its tokens need; the message
    says which document, at which URL, and what is wrong."""


def issuer_check(*, issuer: Issuer) -> str:
    """Read the issuer's discovery document (unless its jwks_uri is registered) and key set
    now, through the SSRF guard as token validation reads them, and say in one line what a
    token would meet: the usable keys by algorithm, and the token endpoint. What discovery
    said is kept on the row (`discovered`, with when). Raises IssuerCheckFailed naming what
    failed: unreachable, refused by the guard, not JSON, no jwks_uri, another `issuer` in the
    document, no usable signing key."""
    found: dict[str, Any] | None = None
    with ssrf.guarded_client(policy=ssrf.IDENTITY) as client:
        if issuer.jwks_uri:
            jwks_uri = issuer.jwks_uri
        else:
            document = _issuer_document(client, "Discovery document", issuer.discovery_url)
            named = document.get("issuer")
            if not isinstance(named, str) or not named:
                raise IssuerCheckFailed(
                    f"Discovery document: {issuer.discovery_url} names no issuer; an OpenID "
                    "provider's names the `iss` of its tokens, which must be the issuer URL "
                    "registered here."
                )
            if named != issuer.issuer:
                raise IssuerCheckFailed(
                    f"Discovery document: {issuer.discovery_url} names the issuer "
                    f"{named[:300]!r}, not {issuer.issuer!r} as registered; tokens carry "
                    "the document's (their `iss`), so register the issuer URL exactly as it "
                    "says."
                )
            jwks_uri = document.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise IssuerCheckFailed(
                    f"Discovery document: {issuer.discovery_url} names no jwks_uri, so there "
                    "is no key set to check tokens with; register the jwks_uri yourself."
                )
            found = identity.discovered_of(document)
            issuer.discovered = {**found, "read_at": timezone.now().isoformat()}
            Issuer.objects.filter(pk=issuer.pk).update(
                discovered=issuer.discovered, updated_at=timezone.now()
            )
        jwks = _issuer_document(client, "Key set", jwks_uri)
    keys = jwks.get("keys")
    if not isinstance(keys, list):
        raise IssuerCheckFailed(f'Key set: {jwks_uri} has no "keys" list (it is not a JWK Set).')
    usable: Counter[str] = Counter()
    unusable: list[str] = []
    for data in keys:
        algorithms = (
            [alg for alg in issuer.algorithms if identity.key_for(data, alg) is not None]
            if isinstance(data, dict)
            else []
        )
        if algorithms:
            usable["/".join(algorithms)] += 1
        else:
            unusable.append(_key_unusable(data, issuer.algorithms))
    skipped = ""
    if unusable:
        reasons = "; ".join(dict.fromkeys(unusable))
        skipped = (
            f" ({len(unusable)} other{'s' if len(unusable) != 1 else ''} not usable: {reasons})"
        )
    if not usable:
        raise IssuerCheckFailed(
            f"Key set: {jwks_uri} has no key that verifies {', '.join(issuer.algorithms)} "
            f"signatures{skipped or ' (it has no keys)'}."
        )
    total = sum(usable.values())
    by_algorithm = ", ".join(f"{a} ×{n}" if n > 1 else a for a, n in usable.items())
    summary = f"{total} key{'s' if total != 1 else ''}: {by_algorithm}{skipped}"
    if found is None:
        return f"{summary}; key set at the registered jwks_uri (discovery not read)"
    endpoint = found.get("token_endpoint")
    return f"{summary}; " + (f"token endpoint {endpoint}" if endpoint else "no token endpoint")


def _issuer_document(client: httpx.Client, what: str, url: str) -> dict[str, Any]:
    try:
        return identity.document_read(client, url)
    except IssuerUnavailable as exc:
        raise IssuerCheckFailed(f"{what}: {exc.message}") from None


def _key_unusable(data: object, algorithms: list[str]) -> str:
    """Why a key of a set verifies none of the issuer's algorithms, in a few words."""
    if not isinstance(data, dict):
        return "not a JSON object"
    kty, alg, use = (str(data.get(name))[:40] for name in ("kty", "alg", "use"))
    if kty == "oct":
        return "a shared secret (kty oct), never accepted"
    if data.get("use") not in (None, "sig"):
        return f"a key for {use!r}, not for signatures"
    if data.get("alg") is not None and data.get("alg") not in algorithms:
        return f"{alg}, not an algorithm registered for this issuer"
    return f"a key of type {kty} that fits none of {', '.join(algorithms)}"


@transaction.atomic
def agent_create(
    *,
    tenant: Tenant,
    slug: str,
    name: str,
    description: str,
    executor_kind: str,
    executor_config: dict[str, Any] | None = None,
    executor_secrets: Mapping[str, str] | None = None,
    **fields: Any,
) -> Agent:
    """Register an agent. `executor_secrets` (name -> secret) are stored encrypted and given
    to its executor as keyword arguments; nothing shows them again."""
    secrets = executor_secrets_validate(executor_secrets or {})
    agent = Agent(
        tenant=tenant,
        slug=slug,
        name=name,
        description=description,
        executor_kind=executor_kind,
        executor_config=executor_config or {},
        executor_secrets_encrypted=executor_secrets_seal(secrets),
        **fields,
    )
    _agent_checked(agent, lambda: agent_validate(agent, secret_names=secrets))
    agent.save()
    return agent


def _agent_checked(agent: Agent, check: Callable[[], None]) -> None:
    """The model's own checks (every field's bounds, uniqueness, the custom domain) and
    `check`'s, every problem of both at once. Raises ValidationError."""
    errors: dict[str, list[str]] = {}
    for step in (agent.full_clean, check):
        try:
            step()
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def agent_secrets_set(*, agent: Agent, secrets: Mapping[str, str]) -> Agent:
    """Replace all of the agent's executor secrets with `secrets` (name -> secret); {} clears
    them. They are checked against the agent's stored executor config (a name must not be in
    its init_kwargs too; a python executor's constructor must take it), stored encrypted, and
    never shown again: pages show only the names. The caller has found `agent` in the tenant
    it acts for."""
    checked = executor_secrets_validate(secrets)
    stored = (
        Agent.objects.select_for_update()
        .only("executor_kind", "executor_config")
        .get(pk=agent.pk, tenant_id=agent.tenant_id)
    )
    for check in (executor_secrets_check, executor_arguments_check):
        check(kind=stored.executor_kind, config=stored.executor_config, names=checked)
    agent.executor_secrets_encrypted = executor_secrets_seal(checked)
    agent.save(update_fields=["executor_secrets_encrypted", "updated_at"])
    return agent


@transaction.atomic
def api_key_create(
    *,
    tenant: Tenant,
    name: str,
    principal: str = "",
    scopes: list[str] | None = None,
    agent: Agent | None = None,
) -> tuple[ApiKey, str]:
    """Create a key; return it with the full secret, which is never stored or shown again."""
    if agent is not None and agent.tenant_id != tenant.pk:
        raise ValueError("The key's agent must belong to the key's tenant.")
    prefix, secret = new_key_material()
    key = ApiKey(
        tenant=tenant,
        name=name,
        prefix=prefix,
        secret_hash=hash_secret(secret),
        principal=principal or name,
        scopes=scopes or [],
        agent=agent,
    )
    key.full_clean()
    key.save()
    return key, secret


def _jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """RFC 7638: SHA-256 over the required members, sorted, without whitespace."""
    required = {name: jwk[name] for name in ("crv", "kty", "x", "y")}
    canonical = json.dumps(required, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode()


def _signing_key_new(tenant: Tenant) -> SigningKey:
    private_key = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = ECAlgorithm.to_jwk(private_key.public_key(), as_dict=True)
    kid = _jwk_thumbprint(jwk)
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return SigningKey.objects.create(
        tenant=tenant,
        kid=kid,
        algorithm=SigningKey.ALGORITHM_ES256,
        private_key_encrypted=crypto.encrypt(pem),
        public_jwk={**jwk, "kid": kid, "alg": SigningKey.ALGORITHM_ES256, "use": "sig"},
    )


def _signing_key_newest(tenant: Tenant) -> SigningKey | None:
    return (
        SigningKey.objects.filter(tenant=tenant, retired_at__isnull=True)
        .order_by("-created_at", "-id")
        .first()
    )


def _tenant_lock(tenant: Tenant) -> None:
    # Serializes key creation per tenant (SQLite's IMMEDIATE transactions serialize anyway).
    Tenant.objects.select_for_update().only("pk").get(pk=tenant.pk)


def signing_key_active(*, tenant: Tenant) -> SigningKey:
    """The key that signs the tenant's pushes now: its newest unretired one, made on first use."""
    key = _signing_key_newest(tenant)
    if key is not None:
        return key
    with transaction.atomic():
        _tenant_lock(tenant)
        # Another process may have made it while this one waited for the lock.
        return _signing_key_newest(tenant) or _signing_key_new(tenant)


@transaction.atomic
def signing_key_rotate(*, tenant: Tenant) -> SigningKey:
    """A new signing key. The older ones stay published (receivers' cached JWKS keep
    verifying) until signing_key_retire retires them."""
    _tenant_lock(tenant)
    return _signing_key_new(tenant)


@transaction.atomic
def signing_key_retire(*, signing_key: SigningKey, at: datetime | None = None) -> SigningKey:
    """Stop publishing a key from `at` (default now). The active key must be rotated first."""
    _tenant_lock(signing_key.tenant)
    signing_key.refresh_from_db(fields=["retired_at"])
    if signing_key.retired_at is not None:
        return signing_key
    if _signing_key_newest(signing_key.tenant) == signing_key:
        raise ValueError("This key signs the tenant's pushes; rotate before retiring it.")
    signing_key.retired_at = at or timezone.now()
    signing_key.save(update_fields=["retired_at"])
    return signing_key


__all__ = [
    "agent_create",
    "agent_secrets_set",
    "api_key_create",
    "executor_config_validate",
    "signing_key_active",
    "signing_key_retire",
    "signing_key_rotate",
    "tenant_create",
]


# --- an agent's life after registration, and the people of a tenant -------------------------


class ActionRefused(ValueError):
    """A change the rules do not allow now; the message says why and what to do instead."""


@transaction.atomic
def agent_set_active(*, agent: Agent, active: bool) -> Agent:
    """Disable or enable an agent. Disabled, its URLs answer "agent not found" on every
    binding (within A2A_AUTH_CACHE_SECONDS on every process); its tasks stay stored, runs in
    flight finish, and it can be enabled again."""
    agent.is_active = active
    agent.save(update_fields=["is_active", "updated_at"])
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, fields: Iterable[str]) -> Agent:
    """Save the given fields of an agent its form changed, the row locked, so that what changed
    meanwhile (disabled, its secrets) is left as it is. The fields are checked again, within
    their bounds (agents.limits) as on registration; the form checked the rest (the executor
    config against the secrets it sets, the SSRF guard on its URLs, which every connection
    checks again). Raises ValidationError before anything is written."""
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    _agent_checked(agent, lambda: agent_fields_check(agent))
    agent.save(update_fields=[*fields, "updated_at"])
    return agent


def agent_task_counts(*, agent: Agent) -> dict[str, int]:
    """What deleting the agent deletes with it, for the confirmation page."""
    tasks = agent.tasks.all()
    return {
        "tasks": tasks.count(),
        "running": tasks.filter(state__in=RUNNING_STATES).count(),
        "keys": agent.api_keys.count(),
    }


def agent_delete_refusal(*, agent: Agent) -> str:
    """Why the agent cannot be deleted now ("" when it can): it is active, it was disabled
    less than A2A_AUTH_CACHE_SECONDS ago (a process may still take a message for it), or a
    task of it has a run queued or in flight (a worker may still write to it)."""
    if agent.is_active:
        return f"Agent {agent} is active: disable it first, then delete it."
    if timezone.now() < agent.updated_at + timedelta(seconds=settings.A2A_AUTH_CACHE_SECONDS):
        return (
            f"Agent {agent} was disabled a moment ago; try again in a second or two, once no "
            "process takes messages for it."
        )
    running = agent.tasks.filter(state__in=RUNNING_STATES).count()
    if running:
        return (
            f"Agent {agent} has {running} task{'s' if running != 1 else ''} with a run queued "
            "or in flight; wait for them to finish (or cancel them), then delete it."
        )
    return ""


@transaction.atomic
def agent_delete(*, agent: Agent) -> dict[str, int]:
    """Delete a disabled agent with everything it holds: its tasks (history, artifacts, events,
    push configs and deliveries) and its own API keys, unless `agent_delete_refusal` says why
    not (checked again here with the agent's row locked)."""
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    if refusal := agent_delete_refusal(agent=locked):
        raise ActionRefused(refusal)
    counts = agent_task_counts(agent=locked)
    locked.delete()
    return counts


def _lock_people(tenant_id: int) -> None:
    """Changes to a tenant's people happen one after another: each locks the tenant's row
    first (two owners demoting each other cannot both pass the last-owner check)."""
    Tenant.objects.select_for_update().filter(pk=tenant_id).first()


def _membership_locked(membership: Membership) -> Membership:
    """The membership as it is now, read under the tenant's lock."""
    _lock_people(membership.tenant_id)
    current = Membership.objects.select_related("user", "tenant").filter(pk=membership.pk).first()
    if current is None:
        raise ActionRefused(f"{membership.user.get_username()} is no longer in this tenant.")
    return current


def membership_keeps_an_owner(membership: Membership) -> None:
    """A tenant that has owners keeps at least one (one with none is run by operators)."""
    if membership.role != Membership.Role.OWNER:
        return
    others = Membership.objects.filter(
        tenant_id=membership.tenant_id, role=Membership.Role.OWNER
    ).exclude(pk=membership.pk)
    if not others.exists():
        raise ActionRefused(
            f"{membership.user.get_username()} is the last owner of tenant "
            f"{membership.tenant.slug}: make someone else an owner first."
        )


def _role_check(role: str) -> None:
    if role not in Membership.Role.values:
        raise ActionRefused(f"{role!r} is not a role; use one of {', '.join(Membership.Role)}.")


@transaction.atomic
def membership_add(*, tenant: Tenant, user: Any, role: str) -> Membership:
    _role_check(role)
    _lock_people(tenant.pk)
    if Membership.objects.filter(tenant=tenant, user=user).exists():
        raise ActionRefused(f"{user.get_username()} is already in tenant {tenant.slug}.")
    return Membership.objects.create(tenant=tenant, user=user, role=role)


@transaction.atomic
def membership_set_role(*, membership: Membership, role: str) -> Membership:
    _role_check(role)
    current = _membership_locked(membership)
    if role != Membership.Role.OWNER:
        membership_keeps_an_owner(current)
    current.role = role
    current.save(update_fields=["role"])
    return current


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    current = _membership_locked(membership)
    membership_keeps_an_owner(current)
    current.delete()
