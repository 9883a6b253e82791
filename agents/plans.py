"""What a tenant may use: the limits of its plan, overridden per tenant, agent and API key.

One table (LIMITS) names every limit, where it may be overridden and what it means; the
models, the forms, the admin, the console and docs/limits.md read it. A value of 0 means
unlimited. A tenant without a plan has the operator's default plan (`A2A_DEFAULT_PLAN`, by
name) if there is one, else no limits at all.

How a limit is enforced is not decided here:
- the request rates by the admission point every binding shares (agents.rates, called from
  bindings.callers), counted in Redis (in process on the embedded profile);
- runs running and runs queued by the run lanes in PostgreSQL (tasks_app.lanes);
- the run quotas and stored tasks by the send service, before it writes anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError

if TYPE_CHECKING:
    from .models import Agent, Plan, Tenant

# Scopes at which a limit may be set: on the plan (and overridden on the tenant), on an agent,
# on an API key.
TENANT = "tenant"
AGENT = "agent"
KEY = "key"


@dataclass(frozen=True)
class LimitSpec:
    name: str
    label: str
    unit: str
    help: str
    # Where a value may override the plan's: the tenant always may; an agent or a key may for
    # the limits that count per agent or per key.
    scopes: tuple[str, ...] = (TENANT,)


LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec(
        "requests_per_second",
        "Requests per second (tenant)",
        "requests/s",
        "A2A calls a second to all the tenant's agents, on every binding, sustained over a minute.",
    ),
    LimitSpec(
        "request_burst",
        "Request burst (tenant)",
        "requests",
        "A2A calls to all the tenant's agents in any one second.",
    ),
    LimitSpec(
        "key_requests_per_second",
        "Requests per second (each API key)",
        "requests/s",
        "A2A calls a second with one API key, sustained over a minute; a key may have its own.",
        scopes=(TENANT, KEY),
    ),
    LimitSpec(
        "key_request_burst",
        "Request burst (each API key)",
        "requests",
        "A2A calls with one API key in any one second; a key may have its own.",
        scopes=(TENANT, KEY),
    ),
    LimitSpec(
        "running_runs",
        "Runs at once (tenant)",
        "runs",
        "Agent runs of the tenant running at the same time; more wait in the tenant's lane.",
    ),
    LimitSpec(
        "agent_running_runs",
        "Runs at once (each agent)",
        "runs",
        "Runs of one agent running at the same time; more wait in the lane; an agent may have "
        "its own.",
        scopes=(TENANT, AGENT),
    ),
    LimitSpec(
        "queued_runs",
        "Runs waiting (tenant)",
        "runs",
        "Runs accepted but not yet started; a send past it is refused.",
    ),
    LimitSpec(
        "runs_per_day",
        "Runs per day (tenant)",
        "runs",
        "Messages sent to the tenant's agents (each starts a run) per UTC day.",
    ),
    LimitSpec(
        "runs_per_month",
        "Runs per month (tenant)",
        "runs",
        "Messages sent to the tenant's agents per UTC calendar month.",
    ),
    LimitSpec(
        "stored_tasks",
        "Stored tasks (tenant)",
        "tasks",
        "Tasks the tenant keeps (until retention deletes them); a send that would make one "
        "more is refused.",
    ),
)
BY_NAME = {spec.name: spec for spec in LIMITS}
NAMES = tuple(BY_NAME)
# The largest value a limit takes (an int column; far past anything meaningful).
MAX_VALUE = 1_000_000_000


@dataclass(frozen=True)
class Limits:
    """The limits that apply to one call: its tenant's plan with every override applied.
    0: unlimited."""

    requests_per_second: int = 0
    request_burst: int = 0
    key_requests_per_second: int = 0
    key_request_burst: int = 0
    running_runs: int = 0
    agent_running_runs: int = 0
    queued_runs: int = 0
    runs_per_day: int = 0
    runs_per_month: int = 0
    stored_tasks: int = 0
    # The tenant's share of the workers when tenants wait for them together (its run lane's
    # window is this many times A2A_LANE_WINDOW).
    weight: int = 1

    @property
    def any(self) -> bool:
        return any(getattr(self, name) for name in NAMES)


UNLIMITED = Limits()
assert {f.name for f in fields(Limits)} == {*NAMES, "weight"}


def overrides_clean(value: Any, scope: str) -> dict[str, int]:
    """An overrides object as stored on a tenant, an agent or a key: limit name -> value;
    raises ValidationError naming what is wrong."""
    if value in (None, ""):
        return {}
    if not isinstance(value, dict):
        raise ValidationError("Limits must be an object of limit name to number.")
    cleaned = {}
    for name, number in value.items():
        spec = BY_NAME.get(name)
        if spec is None or scope not in spec.scopes:
            allowed = ", ".join(s.name for s in LIMITS if scope in s.scopes)
            raise ValidationError(
                f"{name!r} is not a limit that can be set on a{'n' if scope == AGENT else ''} "
                f"{scope}; those are: {allowed}."
            )
        if isinstance(number, bool) or not isinstance(number, int):
            raise ValidationError(f"{name}: {number!r} is not a whole number.")
        if not 0 <= number <= MAX_VALUE:
            raise ValidationError(f"{name}: {number} is not between 0 (unlimited) and {MAX_VALUE}.")
        cleaned[name] = number
    return cleaned


def plan_limits(plan: Plan | None) -> dict[str, int]:
    if plan is None:
        return {}
    return {name: getattr(plan, name) for name in NAMES} | {"weight": plan.weight}


def tenant_limits(tenant: Tenant, plan: Plan | None) -> Limits:
    """The tenant's limits: its plan (or the default plan), then its own overrides."""
    values = plan_limits(plan) | (tenant.limits or {})
    return Limits(**values)


def call_limits(
    tenant_limits_: Limits, agent: Agent | None, key_limits: Iterable[tuple[str, int]] = ()
) -> Limits:
    """The limits of one call: the tenant's, with the agent's and the key's overrides (a key's
    `key_*`, an agent's `agent_running_runs`)."""
    own: dict[str, int] = {}
    if agent is not None and agent.limits:
        own.update(agent.limits)
    own.update(key_limits)
    if not own:
        return tenant_limits_
    return Limits(**(_as_dict(tenant_limits_) | own))


def _as_dict(limits: Limits) -> dict[str, int]:
    return {f.name: getattr(limits, f.name) for f in fields(Limits)}


def default_plan_name() -> str:
    return settings.A2A_DEFAULT_PLAN
