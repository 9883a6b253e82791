"""The SSRF guard of every outbound request: push deliveries and the requests agents make (the
`openai`, `a2a-proxy` and `webhook` executors) reach the public internet, nothing else.

Two checks share one rule. `url_check` vets a URL when it is configured (a push config is
created, an agent is saved: the caller shows `UnsafeUrl.reason`). `guarded_async_client` /
`guarded_client` make the HTTP client enforce it again at connect time: the host is resolved
once more, every address is checked, and the socket is opened to a checked address, so a name
that resolves to a public address at creation and to 10.0.0.5 at delivery (DNS rebinding) is
still refused. The Host header, TLS SNI and certificate verification keep the URL's host name.

The rule: an address is refused when it is loopback, private (RFC 1918, fc00::/7), link-local,
multicast, unspecified, reserved, in the shared address space (100.64.0.0/10), a cloud metadata
address, or otherwise not globally routable; a host is refused when ANY of its addresses is.
IPv4-mapped, NAT64 and 6to4 IPv6 addresses are judged by the IPv4 address they carry.

Each purpose has its own `Policy`: the words its refusals use, and the settings with which an
operator opens exceptions (exact host names, CIDRs) and sets the default timeout: PUSH
(A2A_PUSH_ALLOWED_HOSTS, A2A_PUSH_ALLOWED_NETWORKS), AGENT (A2A_AGENT_ALLOWED_HOSTS,
A2A_AGENT_ALLOWED_NETWORKS) and IDENTITY (A2A_IDENTITY_ALLOWED_HOSTS, ..._NETWORKS: the
discovery documents and key sets of token issuers, agents.identity), so that allowing an
internal model server for agents does not let push configs reach it too. The settings are
read on every check, not cached.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
import httpcore
import httpx
from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Instance metadata services hand out cloud credentials: the prize of most SSRF attacks.
# (Most of them are also link-local, private or shared addresses; naming them says why.)
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, ...
        "169.254.170.2",  # AWS ECS task credentials
        "169.254.170.23",  # AWS EKS pod identity
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # AWS EKS pod identity over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (globally routable on paper, hence listed)
    )
)
_PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
_SHARED_ADDRESS_SPACE = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_CHARACTERS = re.compile(r"[A-Za-z0-9._:-]+")  # names, IPv4 and IPv6 literals
_DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)  # httpx's


@dataclass(frozen=True)
class Policy:
    """Who the guard checks for: what its refusals call the URL, and the settings that open
    exceptions and give the default timeout."""

    what: str
    hosts_setting: str
    networks_setting: str
    timeout_setting: str


PUSH = Policy(
    "push URL", "A2A_PUSH_ALLOWED_HOSTS", "A2A_PUSH_ALLOWED_NETWORKS", "A2A_PUSH_TIMEOUT_SECONDS"
)
AGENT = Policy(
    "agent URL",
    "A2A_AGENT_ALLOWED_HOSTS",
    "A2A_AGENT_ALLOWED_NETWORKS",
    "A2A_AGENT_TIMEOUT_SECONDS",
)

IDENTITY = Policy(
    "issuer URL",
    "A2A_IDENTITY_ALLOWED_HOSTS",
    "A2A_IDENTITY_ALLOWED_NETWORKS",
    "A2A_IDENTITY_TIMEOUT_SECONDS",
)


class UnsafeUrl(Exception):
    """A URL the guard refuses; `reason` is one sentence fit to show the tenant."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def url_check(
    url: str, *, policy: Policy = PUSH, what: str = "", unresolvable_ok: bool = False
) -> None:
    """Raise UnsafeUrl unless `url` is an http(s) URL whose host resolves to allowed addresses.
    `what` names the URL in the reason (by default the policy's word for it).
    `unresolvable_ok`: a name that does not resolve now passes (a URL used later, through the
    guarded clients, whose connect-time check decides then); a refused address still fails.

    Blocking (it resolves the host): from async code, call it through sync_to_async.
    """
    what = what or policy.what
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise UnsafeUrl(f"{what} is not a valid URL: {exc}.") from None
    if parsed.scheme not in ("http", "https"):
        raise UnsafeUrl(
            f"{what} scheme {parsed.scheme!r} is not allowed; use an http or https URL."
            if parsed.scheme
            else f"{what} must be an absolute http or https URL."
        )
    if not parsed.raw_host:
        raise UnsafeUrl(f"{what} has no host.")
    if parsed.userinfo:
        raise UnsafeUrl(
            f"{what} must not carry a user name or password; give credentials "
            + ("in the config's authentication instead." if policy is PUSH else "as a secret.")
        )
    host = parsed.raw_host.decode("ascii")
    if not _HOST_CHARACTERS.fullmatch(host):  # httpx percent-encodes what it cannot place
        raise UnsafeUrl(f"{what} host {host!r} is not a valid host name.")
    port = parsed.port if parsed.port is not None else 443 if parsed.scheme == "https" else 80
    if not 0 < port < 65536:
        raise UnsafeUrl(f"{what} port {port} is out of range (1-65535).")
    try:
        _resolve(host, port, policy, what)
    except _Unresolvable:
        if not unresolvable_ok:
            raise


def guarded_async_client(
    *, verify: ssl.SSLContext | bool = True, policy: Policy = PUSH, **kwargs: Any
) -> httpx.AsyncClient:
    """An httpx.AsyncClient whose every connection passes the SSRF guard.

    Redirects are not followed: a 3xx is the delivery's answer, recorded as it came. (A
    caller that follows one anyway per request is still guarded: each hop's connection is
    checked.) Connecting to a refused address raises UnsafeUrl, not an httpx error; a host
    that does not resolve raises httpx.ConnectError, which may heal on retry. No proxy from
    the environment and no .netrc are used: the guard checks the address it connects to.
    `verify` is httpx's (True, False, or an SSLContext); other keyword arguments go to
    httpx.AsyncClient (headers, timeout: the policy's timeout setting unless given).
    """
    transport = GuardedAsyncTransport(verify=verify, policy=policy)
    return httpx.AsyncClient(**_client_kwargs(kwargs, policy), transport=transport)


def guarded_client(
    *, verify: ssl.SSLContext | bool = True, policy: Policy = PUSH, **kwargs: Any
) -> httpx.Client:
    """The synchronous twin of guarded_async_client, with the same guarantees."""
    transport = GuardedTransport(verify=verify, policy=policy)
    return httpx.Client(**_client_kwargs(kwargs, policy), transport=transport)


def _client_kwargs(kwargs: dict[str, Any], policy: Policy) -> dict[str, Any]:
    # Each of these would route requests around the guarded transport or re-enable redirects.
    for key in ("transport", "mounts", "proxy", "follow_redirects", "trust_env", "app", "http2"):
        if key in kwargs:
            raise TypeError(f"guarded clients decide {key!r} themselves")
    kwargs.setdefault("timeout", httpx.Timeout(getattr(settings, policy.timeout_setting)))
    return {**kwargs, "follow_redirects": False, "trust_env": False}


class GuardedAsyncTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, with a connection pool whose network backend checks every connect."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits | None = None,
        policy: Policy = PUSH,
    ) -> None:
        limits = limits or _DEFAULT_LIMITS
        # The parent's __init__ would build a pool without our backend (httpx exposes no
        # hook for it); the parent's methods use nothing but self._pool.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedAsyncBackend(policy),
        )


class GuardedTransport(httpx.HTTPTransport):
    """The synchronous twin of GuardedAsyncTransport."""

    def __init__(
        self,
        *,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits | None = None,
        policy: Policy = PUSH,
    ) -> None:
        limits = limits or _DEFAULT_LIMITS
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_GuardedBackend(policy),
        )


class _GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: Policy) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._policy = policy

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await anyio.to_thread.run_sync(_resolve_for_connect, host, port, self._policy)
        error: Exception | None = None
        for address in addresses:  # each one checked; the first that answers wins
            try:
                return await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise UnsafeUrl("outbound requests never use Unix sockets.")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, policy: Policy) -> None:
        self._inner = httpcore.SyncBackend()
        self._policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in _resolve_for_connect(host, port, self._policy):
            try:
                return self._inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise UnsafeUrl("outbound requests never use Unix sockets.")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _resolve_for_connect(host: str, port: int, policy: Policy) -> list[str]:
    # At connect time a name that stopped resolving is a network failure (retry may heal
    # it), not a verdict on the URL; a refused address stays UnsafeUrl.
    try:
        return _resolve(host, port, policy, policy.what)
    except _Unresolvable as exc:
        raise httpcore.ConnectError(str(exc)) from None


class _Unresolvable(UnsafeUrl):
    pass


def _resolve(host: str, port: int, policy: Policy = PUSH, what: str = "") -> list[str]:
    """Every address of `host`, checked; raise UnsafeUrl if any is refused."""
    what = what or policy.what
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise _Unresolvable(f"{what} host {host!r} does not resolve ({exc}).") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if host.rstrip(".").lower() in _allowed_hosts(policy):
        return addresses
    for address in addresses:
        problem = address_problem(ipaddress.ip_address(address), policy)
        if problem:
            where = (
                f"{what} address {address} is"
                if address == host
                else f"{what} host {host!r} resolves to {address},"
            )
            raise UnsafeUrl(
                f"{where} {problem}; {policy.what}s must reach the public internet (an "
                f"operator can allowlist it with {policy.networks_setting} or "
                f"{policy.hosts_setting})."
            )
    return addresses


def address_problem(address: IPAddress, policy: Policy = PUSH) -> str:
    """What makes `address` unfit for an outbound request ('' when nothing does)."""
    embedded = _embedded_ipv4(address)
    if any(
        a in network
        for a in (address, embedded)
        if a is not None
        for network in _allowed_networks(policy)
    ):
        return ""
    if embedded is not None:
        problem = address_problem(embedded, policy)
        return f"{problem} (it carries {embedded})" if problem else ""
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in _SHARED_ADDRESS_SPACE:
        return "a shared (carrier-grade NAT) address"
    if any(address in network for network in _PRIVATE_NETWORKS):
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a globally routable address"
    return ""


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.sixtofour


def _allowed_hosts(policy: Policy) -> frozenset[str]:
    return frozenset(h.rstrip(".").lower() for h in getattr(settings, policy.hosts_setting))


def _allowed_networks(policy: Policy) -> tuple[IPNetwork, ...]:
    return _parse_networks(tuple(getattr(settings, policy.networks_setting)))


@functools.lru_cache(maxsize=8)
def _parse_networks(networks: tuple[str, ...]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(n) for n in networks)
