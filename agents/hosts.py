"""Agents at host names of their own: the operator's pattern (A2A_AGENT_HOST_PATTERN, such as
`{agent}--{tenant}.agents.example.com`) and each agent's optional custom domain.

On such a host the agent is the whole server: the web's host router (a2a_platform.asgi) maps
`/<path>` there to `/a2a/<tenant>/<agent>/<path>`, and the card fetched there advertises the
host's URLs (agents.cards).
"""

from __future__ import annotations

import re
from functools import cache
from urllib.parse import urlsplit

from django.conf import settings

from a2a_platform import hosts as allowed

from .cache import domain_agent, domain_agent_cached
from .models import Agent

_SLUG = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"


@cache
def _pattern(pattern: str) -> re.Pattern[str] | None:
    if not pattern:
        return None
    literal = re.escape(pattern)
    # Non-greedy agent first: with `{agent}--{tenant}`, `a--b--c` is agent `a`, tenant `b--c`.
    regex = literal.replace(re.escape("{agent}"), f"(?P<agent>{_SLUG}?)").replace(
        re.escape("{tenant}"), f"(?P<tenant>{_SLUG})"
    )
    return re.compile(regex)


def host_name(host: str) -> str:
    """A Host header's name: lower case, without its port or a trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):  # an IPv6 literal: never an agent's
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0].rstrip(".") if ":" in host else host.rstrip(".")


def pattern_agent(name: str) -> tuple[str, str] | None:
    """The `(tenant, agent)` slugs a host name holds by the pattern, if it fits it."""
    regex = _pattern(settings.A2A_AGENT_HOST_PATTERN)
    match = regex.fullmatch(name) if regex else None
    return (match["tenant"], match["agent"]) if match else None


# host_agent_nowait's answer when only a database lookup can tell.
LOOKUP = "lookup"


def host_agent_nowait(host: str) -> tuple[str, str] | None | str:
    """What host_agent answers, when it can without the database; LOOKUP otherwise (a host
    that may be a custom domain this process has not seen lately)."""
    name = host_name(host)
    if not name or name in _platform_hosts() or _is_address(name) or "." not in name:
        return None
    return pattern_agent(name) or domain_agent_cached(name) or LOOKUP


def host_agent(host: str) -> tuple[str, str] | None:
    """The `(tenant, agent)` slugs of the agent a request's Host names, or None: the host fits
    the pattern (whether such an agent exists is for the view to say), or is an active agent's
    custom domain (looked up, kept for A2A_AUTH_CACHE_SECONDS, then admitted by ALLOWED_HOSTS).
    The platform's own hosts and IP literals are never an agent's and cost no lookup."""
    found = host_agent_nowait(host)
    if found != LOOKUP:
        return found  # type: ignore[return-value]
    name = host_name(host)
    found = domain_agent(name)
    if found is not None:
        allowed.allow(name)
    return found


def agent_host(agent: Agent) -> str:
    """The agent's own host name: its custom domain, else the pattern's; "" for none."""
    if agent.custom_domain:
        return agent.custom_domain
    pattern = settings.A2A_AGENT_HOST_PATTERN
    return pattern.format(agent=agent.slug, tenant=agent.tenant.slug) if pattern else ""


def custom_domain_problem(domain: str) -> str | None:
    """Why `domain` cannot be a custom domain (beyond its syntax and uniqueness), or None."""
    if domain in _platform_hosts():
        return f"{domain} is the platform's own host name."
    if pattern_agent(domain) is not None or (
        settings.A2A_AGENT_HOST_DOMAIN and domain.endswith(settings.A2A_AGENT_HOST_DOMAIN)
    ):
        return (
            f"{domain} is under the platform's agent host names "
            f"({settings.A2A_AGENT_HOST_PATTERN}); agents have those already."
        )
    return None


@cache
def _platform_hosts_of(public_base_url: str, configured: tuple[str, ...]) -> frozenset[str]:
    public = (urlsplit(public_base_url).hostname or "").lower()
    return frozenset({public, "localhost", *(h for h in configured if not h.startswith("."))})


def _platform_hosts() -> frozenset[str]:
    """The platform's own host names: the public one, and those ALLOWED_HOSTS names exactly."""
    configured = tuple(list.__iter__(settings.ALLOWED_HOSTS))
    return _platform_hosts_of(settings.A2A_PUBLIC_BASE_URL, configured)


def _is_address(name: str) -> bool:
    return name.startswith("[") or bool(re.fullmatch(r"[0-9.]+", name))
