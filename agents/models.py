"""Tenants, the agents they host, the API keys that call them, and the people in each tenant."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinValueValidator,
    RegexValidator,
)
from django.db import models

from a2a_platform.versions import SUPPORTED_VERSIONS

from . import limits, plans

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
    "Use 1-63 lowercase letters, digits and hyphens, not starting or ending with a hyphen.",
)

# A host name: dot-separated labels of letters, digits and inner hyphens, lower case, with a
# top-level label that is not all digits (so no IPv4 literal).
domain_validator = RegexValidator(
    r"^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$",
    "Use a lower-case host name such as agent.example.com (labels of letters, digits and "
    "hyphens, separated by dots; no scheme, port or path).",
)

# The media types a new agent starts with in the console's and the admin's registration forms.
DEFAULT_MODES: tuple[str, ...] = ("text/plain",)

# The A2A versions an agent serves, stored as "1.0,0.3,0.1" (newest first): every one the
# platform speaks unless the agent says otherwise.
ALL_VERSIONS = ",".join(SUPPORTED_VERSIONS)


def versions_parse(value: str) -> tuple[str, ...]:
    """The versions of a `protocol_versions` value, in the platform's order, without repeats."""
    named = {v.strip() for v in value.split(",") if v.strip()}
    return tuple(v for v in SUPPORTED_VERSIONS if v in named)


def versions_validator(value: str) -> None:
    named = [v.strip() for v in str(value).split(",") if v.strip()]
    unknown = sorted(set(named) - set(SUPPORTED_VERSIONS))
    if unknown:
        raise ValidationError(
            f"Not an A2A version the platform speaks: {', '.join(unknown)} (it speaks "
            f"{', '.join(SUPPORTED_VERSIONS)})."
        )
    if not named:
        raise ValidationError("An agent serves at least one A2A version.")


def _limit_field(name: str) -> models.PositiveIntegerField:
    spec = plans.BY_NAME[name]
    return models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(plans.MAX_VALUE)],
        verbose_name=spec.label,
        help_text=f"{spec.help} In {spec.unit}; 0 is unlimited.",
    )


class Plan(models.Model):
    """A set of limits the operator gives tenants (agents.plans.LIMITS: 0 is unlimited)."""

    name = models.CharField(max_length=100, unique=True)
    description = models.CharField(max_length=500, blank=True)
    # The tenant's share of the workers when tenants wait for them together.
    weight = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Share of the workers when tenants wait for them together: a tenant of "
        "weight 2 gets twice the runs in flight of one of weight 1 (1-100).",
    )
    requests_per_second = _limit_field("requests_per_second")
    request_burst = _limit_field("request_burst")
    key_requests_per_second = _limit_field("key_requests_per_second")
    key_request_burst = _limit_field("key_request_burst")
    running_runs = _limit_field("running_runs")
    agent_running_runs = _limit_field("agent_running_runs")
    queued_runs = _limit_field("queued_runs")
    runs_per_day = _limit_field("runs_per_day")
    runs_per_month = _limit_field("runs_per_month")
    stored_tasks = _limit_field("stored_tasks")

    def __str__(self) -> str:
        return self.name


def _tenant_limits_valid(value: object) -> None:
    plans.overrides_clean(value, plans.TENANT)


def _agent_limits_valid(value: object) -> None:
    plans.overrides_clean(value, plans.AGENT)


def _key_limits_valid(value: object) -> None:
    plans.overrides_clean(value, plans.KEY)


def _overrides_field(validator: Callable[[object], None], help_text: str) -> models.JSONField:
    """Limit overrides (agents.plans), limit name -> value, checked for their place."""
    return models.JSONField(
        default=dict, db_default={}, blank=True, validators=[validator], help_text=help_text
    )


class Tenant(models.Model):
    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=limits.TENANT_NAME)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Its limits: the plan's (no plan: the operator's default plan, A2A_DEFAULT_PLAN, if any),
    # then these overrides, limit name -> value (agents.plans).
    plan = models.ForeignKey(
        Plan, on_delete=models.PROTECT, null=True, blank=True, related_name="tenants"
    )
    limits = _overrides_field(
        _tenant_limits_valid,
        'Overrides of the plan\'s limits, e.g. {"running_runs": 20}; 0 is unlimited.',
    )

    def __str__(self) -> str:
        return self.slug


class Agent(models.Model):
    class Visibility(models.TextChoices):
        PUBLIC = "public", "Public (anonymous calls allowed)"
        PRIVATE = "private", "Private (an API key is required)"

    class WorkerLoss(models.TextChoices):
        FAIL = "fail", "Fail the task"
        RETRY = "retry", "Run it again"

    class AnonymousScope(models.TextChoices):
        ISOLATED = "isolated", "Isolated: anonymous callers reach a task only by its id"
        SHARED = "shared", "Shared: all anonymous callers share one task scope"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="agents")
    slug = models.CharField(max_length=63, validators=[slug_validator])
    name = models.CharField(max_length=limits.AGENT_NAME)
    # A TextField (a textarea in forms) whose bound Django enforces through the validator:
    # `max_length` alone only reaches the form's widget.
    description = models.TextField(
        max_length=limits.AGENT_DESCRIPTION,
        validators=[MaxLengthValidator(limits.AGENT_DESCRIPTION)],
    )
    version = models.CharField(max_length=limits.AGENT_VERSION, default="1.0.0")
    documentation_url = models.URLField(max_length=limits.URL, blank=True)
    icon_url = models.URLField(max_length=limits.URL, blank=True)
    provider_organization = models.CharField(max_length=limits.PROVIDER_ORGANIZATION, blank=True)
    provider_url = models.URLField(max_length=limits.URL, blank=True)
    # A list of v1.0 AgentSkill objects in proto-JSON form (id, name, description, tags, ...).
    skills = models.JSONField(default=list, blank=True)
    # Skills shown only on the authenticated extended card.
    extended_skills = models.JSONField(default=list, blank=True)
    default_input_modes = models.JSONField(default=list, blank=True)
    default_output_modes = models.JSONField(default=list, blank=True)
    executor_kind = models.CharField(max_length=50)
    executor_config = models.JSONField(default=dict, blank=True)
    # Secrets passed to the executor as keyword arguments: a JSON object of name -> secret,
    # encrypted with agents.crypto ("" when there are none). Written only through
    # agents.services.agent_secrets_set (or agent_create); no form or page shows it.
    # db_default: processes of the previous version, which do not know the column, can still
    # insert agents while an upgrade rolls out.
    executor_secrets_encrypted = models.TextField(
        blank=True, default="", db_default="", editable=False
    )
    # Push notification webhooks (the card's capabilities.pushNotifications); off, every push
    # call answers PushNotificationNotSupported.
    push_notifications = models.BooleanField(default=True)
    # The A2A versions the agent serves (`versions_parse`): its card lists only their
    # interfaces, and a call in another version is refused with VersionNotSupportedError.
    protocol_versions = models.CharField(
        max_length=40,
        default=ALL_VERSIONS,
        db_default=ALL_VERSIONS,
        validators=[versions_validator],
        help_text="The A2A versions the agent serves, comma-separated (1.0, 0.3, 0.1). An "
        "agent that serves 1.0 alone has the strict v1.0 card and refuses calls in older "
        "versions.",
    )
    # A repeated messageId gets the first send's task (a client retrying after a lost
    # answer); off, every send makes a new task or turn, whatever its messageId.
    deduplicate_messages = models.BooleanField(
        default=True,
        db_default=True,
        help_text="A send that repeats a messageId (a client retrying) gets the first send's "
        "task instead of a second one; one that reuses it for another message is refused.",
    )
    visibility = models.CharField(
        max_length=10, choices=Visibility.choices, default=Visibility.PRIVATE
    )
    anonymous_scope = models.CharField(
        max_length=10, choices=AnonymousScope.choices, default=AnonymousScope.ISOLATED
    )
    # A host name of the agent's own (`agent.example.com`), served like the pattern's host
    # names (agents/hosts.py); "" for none. Lower case, unique among agents.
    custom_domain = models.CharField(
        max_length=253,
        blank=True,
        default="",
        db_default="",
        validators=[domain_validator],
        help_text="A host name of its own (e.g. agent.example.com), pointed at the platform; "
        "the agent is then the whole server there. Optional.",
    )
    # What becomes of a run whose worker died (killed, its machine lost): `fail` ends the task
    # FAILED; `retry` starts the run again on another worker, up to `worker_loss_attempts`
    # runs in all (the executor reads which one it is: docs/agents.md, "When a worker dies").
    # Retry suits agents whose work is safe to do twice.
    worker_loss = models.CharField(
        max_length=8,
        choices=WorkerLoss.choices,
        default=WorkerLoss.FAIL,
        db_default=WorkerLoss.FAIL,
        help_text="When the worker running a task dies: fail the task, or run it again on "
        "another worker.",
    )
    worker_loss_attempts = models.PositiveSmallIntegerField(
        default=3,
        db_default=3,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="With retry: how many runs a task gets in all, the first included (1-20).",
    )
    # Its own limits (agents.plans: `agent_running_runs`), over the tenant's.
    limits = _overrides_field(
        _agent_limits_valid,
        "Overrides of the tenant's limits for this agent, e.g. "
        '{"agent_running_runs": 5}; 0 is unlimited.',
    )
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "slug"], name="agent_slug_unique_per_tenant"),
            models.UniqueConstraint(
                fields=["custom_domain"],
                condition=~models.Q(custom_domain=""),
                name="agent_custom_domain_unique",
                violation_error_message="Another agent already has this custom domain.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug}/{self.slug}"

    @property
    def is_public(self) -> bool:
        return self.visibility == self.Visibility.PUBLIC

    @property
    def versions(self) -> tuple[str, ...]:
        """The A2A versions the agent serves (`protocol_versions`), newest first."""
        return versions_parse(self.protocol_versions)

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        from .hosts import custom_domain_problem

        if self.custom_domain and (problem := custom_domain_problem(self.custom_domain)):
            raise ValidationError({"custom_domain": problem})


class ApiKey(models.Model):
    """A tenant's API key. Only a SHA-256 digest of the secret is stored."""

    SCOPE_TENANT_ADMIN = "tenant-admin"
    SCOPE_CHOICES = [(SCOPE_TENANT_ADMIN, "Tenant admin: sees every task of the tenant")]

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    # Tasks are owned by the principal, so a rotated key with the same principal keeps its tasks.
    principal = models.CharField(
        max_length=200,
        blank=True,
        help_text="Owner of the tasks made with this key (default: its name).",
    )
    scopes = models.JSONField(default=list, blank=True)
    agent = models.ForeignKey(
        Agent,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_keys",
        help_text="If set, the key works only for this agent.",
    )
    # Its own request rates (agents.plans: `key_requests_per_second`, `key_request_burst`).
    limits = _overrides_field(
        _key_limits_valid,
        "Overrides of the tenant's per-key rates for this key, e.g. "
        '{"key_requests_per_second": 5}; 0 is unlimited.',
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_tenant_admin(self) -> bool:
        return self.SCOPE_TENANT_ADMIN in (self.scopes or [])


class SigningKey(models.Model):
    """A tenant's key for signing push notifications. The private key is stored encrypted.

    The newest unretired key signs; older ones stay in the JWKS until retired, so receivers
    holding a cached JWKS keep verifying across a rotation.
    """

    ALGORITHM_ES256 = "ES256"
    ALGORITHM_CHOICES = [(ALGORITHM_ES256, "ES256 (ECDSA on P-256 with SHA-256)")]

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="signing_keys")
    # The RFC 7638 thumbprint of the public key.
    kid = models.CharField(max_length=64, unique=True)
    algorithm = models.CharField(max_length=10, choices=ALGORITHM_CHOICES, default=ALGORITHM_ES256)
    # PKCS#8 PEM, encrypted with agents.crypto.
    private_key_encrypted = models.TextField()
    public_jwk = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)
    # Once set the key no longer signs; it stays published until this moment (a future one
    # gives receivers a grace period).
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "retired_at"], name="signingkey_tenant_retired")]

    def __str__(self) -> str:
        return f"{self.tenant.slug}: {self.kid}"


class Membership(models.Model):
    """A person's place in a tenant: owners register agents and manage keys; members look on
    and try agents. Staff operators need none: they see every tenant."""

    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant.slug} ({self.role})"


def _usage_counter(help_text: str) -> models.PositiveBigIntegerField:
    # db_default: processes of the previous version, which do not know a new counter, can
    # still add to the row while an upgrade rolls out.
    return models.PositiveBigIntegerField(default=0, db_default=0, help_text=help_text)


class UsageDay(models.Model):
    """What one agent of a tenant used in one UTC day: counted in each process and added to
    this row every few seconds (agents.usage), never worked out from the task tables on read.
    The unique (tenant, agent, day) index serves reads of a tenant's days."""

    # Not indexed on its own: the unique index below starts with it.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="usage_days", db_index=False
    )
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField(help_text="The UTC day counted.")
    requests = _usage_counter("A2A calls that reached the agent (its caller identified).")
    runs = _usage_counter("Agent runs started (jobs a worker claimed).")
    run_seconds = models.FloatField(
        default=0, db_default=0, help_text="Seconds from each run's claim to its release."
    )
    tokens_in = _usage_counter("Model tokens in the prompts the agent sent (openai kind).")
    tokens_out = _usage_counter("Model tokens in the replies the agent got (openai kind).")
    push_deliveries = _usage_counter("Push notification POSTs made (every attempt).")
    refused_rate = _usage_counter("Calls refused over a request rate.")
    refused_quota = _usage_counter("Calls refused over a quota.")
    refused_concurrency = _usage_counter("Calls refused over a cap on runs.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "agent", "day"], name="usage_day_unique")
        ]
        # Today's totals over every tenant (the Prometheus metrics, read at each scrape).
        indexes = [models.Index(fields=["day"], name="usage_day")]

    def __str__(self) -> str:
        return f"{self.tenant_id}/{self.agent_id} {self.day}"


# Signature algorithms an issuer may be registered with: asymmetric only, so a token can never
# be "signed" with a public key used as an HMAC secret, and never `none`.
TOKEN_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
# The kinds of A2A operation a token's scopes are checked for (Issuer.scopes).
SCOPE_OPERATIONS = ("send", "read", "cancel", "push")


def _algorithms_valid(value: object) -> None:
    if not isinstance(value, list) or not value:
        raise ValidationError('List at least one signature algorithm, e.g. ["RS256"].')
    unknown = [a for a in value if a not in TOKEN_ALGORITHMS]
    if unknown:
        raise ValidationError(
            f"Not an accepted token algorithm: {', '.join(map(str, unknown))} (accepted: "
            f"{', '.join(TOKEN_ALGORITHMS)}; HMAC and 'none' never are)."
        )


def _audiences_valid(value: object) -> None:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(a, str) and a.strip() for a in value)
    ):
        raise ValidationError(
            "List at least one accepted audience (the `aud` your provider puts in tokens for "
            "these agents, e.g. the agent's URL or an API identifier)."
        )
    if len(value) > limits.ISSUER_AUDIENCES:
        raise ValidationError(
            f"List at most {limits.ISSUER_AUDIENCES} audiences (there are {len(value)})."
        )
    for n, audience in enumerate(value, 1):
        _issuer_text_check(f"Audience #{n}", audience, limits.ISSUER_AUDIENCE)


def _issuer_text_check(what: str, value: str, most: int) -> None:
    if len(value) > most:
        raise ValidationError(
            f"{what} must be at most {most} characters long (it has {len(value)})."
        )
    if "\x00" in value:  # PostgreSQL keeps no U+0000 in JSON
        raise ValidationError(f"{what} must not contain the character U+0000.")


def _scopes_valid(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError('Map operations to required scopes, e.g. {"send": ["a2a.send"]}.')
    unknown = sorted(set(value) - set(SCOPE_OPERATIONS))
    if unknown:
        raise ValidationError(
            f"Not an operation: {', '.join(unknown)} (operations: {', '.join(SCOPE_OPERATIONS)})."
        )
    for operation, scopes in value.items():
        if not isinstance(scopes, list) or not all(
            isinstance(s, str) and s and " " not in s for s in scopes
        ):
            raise ValidationError(
                f"The scopes of {operation!r} must be a list of scope names without spaces."
            )
        if len(scopes) > limits.ISSUER_SCOPES:
            raise ValidationError(
                f"List at most {limits.ISSUER_SCOPES} scopes for {operation!r} (there are "
                f"{len(scopes)})."
            )
        for scope in scopes:
            _issuer_text_check(f"A scope of {operation!r}", scope, limits.ISSUER_SCOPE)


def _default_algorithms() -> list[str]:
    return ["RS256", "ES256"]


class Issuer(models.Model):
    """An OAuth 2.0 / OpenID Connect token issuer whose bearer tokens call a tenant's agents
    (agents.identity): a tenant's own, or the operator's (no tenant), trusted at every
    tenant. The token's user (`user_claim`) owns the tasks it creates."""

    tenant = models.ForeignKey(
        Tenant,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="issuers",
        help_text="Empty: a platform-wide issuer, trusted at every tenant's agents.",
    )
    name = models.CharField(max_length=200, help_text="A label, e.g. 'Okta (staff)'.")
    issuer = models.URLField(
        max_length=500,
        help_text="The `iss` value of its tokens, e.g. https://login.example.com/realms/main. "
        "Its discovery document is read at <issuer>/.well-known/openid-configuration.",
    )
    jwks_uri = models.URLField(
        max_length=500,
        blank=True,
        help_text="Where its signing keys are; empty: the discovery document's jwks_uri.",
    )
    audiences = models.JSONField(
        validators=[_audiences_valid],
        help_text='The accepted `aud` values, e.g. ["https://agents.example.com/"].',
    )
    algorithms = models.JSONField(default=_default_algorithms, validators=[_algorithms_valid])
    user_claim = models.CharField(
        max_length=100, default="sub", help_text="The claim that names the user (default sub)."
    )
    scopes = models.JSONField(
        default=dict,
        blank=True,
        validators=[_scopes_valid],
        help_text='Scopes required per operation, e.g. {"send": ["a2a.send"], "read": '
        '["a2a.read"]}; an operation not listed needs none.',
    )
    # What discovery said, kept for the card (oauth2 flows) and the console: jwks_uri,
    # token_endpoint, authorization_endpoint, and when it was read.
    discovered = models.JSONField(default=dict, blank=True, editable=False)
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "issuer"],
                name="issuer_unique_per_tenant",
                violation_error_message="This issuer is already registered for the tenant.",
            ),
            models.UniqueConstraint(
                fields=["issuer"],
                condition=models.Q(tenant__isnull=True),
                name="issuer_unique_platform_wide",
                violation_error_message="This issuer is already registered platform-wide.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug if self.tenant else '(platform)'}: {self.issuer}"

    @property
    def discovery_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def required_scopes(self, operation: str) -> tuple[str, ...]:
        return tuple((self.scopes or {}).get(operation, ()))
