"""ALLOWED_HOSTS that also admits agents' custom domains, once they are known to be registered.

Django checks every request's Host against ALLOWED_HOSTS. The configured names and the agents'
domain (A2A_AGENT_HOST_PATTERN) are fixed at start; custom domains are rows, so the host router
(agents.hosts, run before Django sees the request) adds each one it has looked up and found
registered to a set this list also yields. A removed domain stops routing at once (the router
no longer finds it); what it leaves here admits only the Host check, in front of a 404.
"""

from __future__ import annotations

from collections.abc import Iterator

_registered: set[str] = set()


def allow(host: str) -> None:
    """Admit `host`: a registered agent's custom domain."""
    _registered.add(host)


class AllowedHosts(list):  # type: ignore[type-arg]
    """The configured hosts, then the custom domains found registered (in no given order)."""

    def __iter__(self) -> Iterator[str]:
        yield from super().__iter__()
        yield from tuple(_registered)
