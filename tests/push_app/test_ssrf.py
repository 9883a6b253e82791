"""The SSRF guard refuses every non-public address by default, when a config is created and
again at connect time, and lets the operator's allowlist through.

No test leaves the machine: names other than IP literals and `localhost` resolve through the
`dns` fixture's table, and the only sockets are to servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import datetime
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.exceptions import ImproperlyConfigured

from a2a_platform import settings as settings_module
from a2a_platform.ssrf import AGENT, UnsafeUrl, guarded_async_client, guarded_client, url_check
from push_app.services import push_url_validate
from tasks_app.errors import InvalidParamsError

REAL_GETADDRINFO = socket.getaddrinfo


class FakeDns:
    """A resolver table: name -> addresses. IP literals and `localhost` resolve for real."""

    def __init__(self) -> None:
        self.table: dict[str, list[str]] = {}

    def getaddrinfo(self, host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        name = (host.decode() if isinstance(host, bytes) else str(host)).rstrip(".").lower()
        if name in self.table:
            port_number = int(port or 0)
            return [
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port_number, 0, 0))
                if ":" in a
                else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port_number))
                for a in self.table[name]
            ]
        if name == "localhost":
            return REAL_GETADDRINFO(host, port, *args, **kwargs)
        kwargs["flags"] = kwargs.get("flags", 0) | socket.AI_NUMERICHOST
        return REAL_GETADDRINFO(host, port, *args, **kwargs)  # gaierror for any other name


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns()
    monkeypatch.setattr(socket, "getaddrinfo", fake.getaddrinfo)
    return fake


@pytest.fixture(autouse=True)
def production_allowlist(settings: Any) -> Any:
    """Production's defaults (allow nothing), whatever the test run's environment says."""
    settings.A2A_PUSH_ALLOWED_HOSTS = []
    settings.A2A_PUSH_ALLOWED_NETWORKS = []
    return settings


def refusal(url: str) -> str:
    with pytest.raises(UnsafeUrl) as info:
        url_check(url)
    assert str(info.value) == info.value.reason
    return info.value.reason


# --- url_check: addresses ---


@pytest.mark.parametrize(
    "url, problem",
    [
        ("http://127.0.0.1/hook", "a loopback address"),
        ("http://127.8.9.10:8080/hook", "a loopback address"),
        ("http://10.1.2.3/hook", "a private address"),
        ("http://172.16.0.1/hook", "a private address"),
        ("http://192.168.1.1/hook", "a private address"),
        ("http://169.254.169.254/latest/meta-data/", "a cloud metadata address"),
        ("http://169.254.170.2/v2/credentials", "a cloud metadata address"),
        ("http://100.100.100.200/latest/meta-data/", "a cloud metadata address"),
        ("http://192.0.0.192/opc/v2/instance/", "a cloud metadata address"),
        ("http://169.254.1.1/", "a link-local address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("http://0.0.0.0:8000/", "an unspecified address"),
        ("http://100.64.0.1/", "a shared (carrier-grade NAT) address"),
        ("http://240.0.0.1/", "a reserved address"),
        ("http://255.255.255.255/", "a reserved address"),
        ("http://192.0.2.1/", "not a globally routable address"),  # documentation range
        ("http://[::1]/hook", "a loopback address"),
        ("http://[::]/hook", "an unspecified address"),
        ("http://[fe80::1]/hook", "a link-local address"),
        ("http://[fc00::1]/hook", "a private address"),
        ("http://[fd12:3456::1]/hook", "a private address"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "a cloud metadata address"),
        ("http://[ff02::1]/", "a multicast address"),
        ("http://[2001:db8::1]/", "not a globally routable address"),
        # IPv6 carrying IPv4: mapped, NAT64, 6to4. Judged by the IPv4 address inside.
        ("http://[::ffff:127.0.0.1]/hook", "a loopback address (it carries 127.0.0.1)"),
        ("http://[::ffff:a9fe:a9fe]/", "a cloud metadata address (it carries 169.254.169.254)"),
        ("http://[64:ff9b::a00:1]/", "a private address (it carries 10.0.0.1)"),
        ("http://[2002:7f00:1::1]/", "a loopback address (it carries 127.0.0.1)"),
        # Spellings the resolver turns into 127.0.0.1.
        ("http://2130706433/", "a loopback address"),
        ("http://0x7f.1/", "a loopback address"),
    ],
)
def test_non_public_addresses_are_refused_by_default(url: str, problem: str) -> None:
    reason = refusal(url)

    assert problem in reason
    assert "push URLs must reach the public internet" in reason
    assert "A2A_PUSH_ALLOWED_NETWORKS" in reason


def test_an_address_literal_is_named_in_the_reason() -> None:
    assert refusal("http://10.0.0.5/hook").startswith(
        "push URL address 10.0.0.5 is a private address; push URLs must reach the public internet"
    )


def test_localhost_is_refused_by_default() -> None:
    reason = refusal("http://localhost:8000/hook")

    assert reason.startswith("push URL host 'localhost' resolves to ")
    assert "a loopback address" in reason


@pytest.mark.parametrize(
    "addresses, shown",
    [
        (["10.0.0.5"], "resolves to 10.0.0.5, a private address"),
        (["169.254.169.254"], "resolves to 169.254.169.254, a cloud metadata address"),
        (["fd00:ec2::254"], "resolves to fd00:ec2::254, a cloud metadata address"),
        (["::ffff:10.0.0.5"], "resolves to ::ffff:10.0.0.5, a private address"),
        # One bad address among good ones is enough: the connection may pick any of them.
        (["93.184.215.14", "2606:4700::1111", "127.0.0.1"], "resolves to 127.0.0.1, a loopback"),
    ],
)
def test_a_name_that_resolves_to_a_refused_address_is_refused(
    dns: FakeDns, addresses: list[str], shown: str
) -> None:
    # given
    dns.table["hooks.example.com"] = addresses

    # when
    reason = refusal("https://hooks.example.com/a2a")

    # then
    assert reason.startswith(f"push URL host 'hooks.example.com' {shown}")


def test_a_name_that_resolves_to_public_addresses_passes(dns: FakeDns) -> None:
    dns.table["hooks.example.com"] = ["93.184.215.14", "2606:4700::1111"]

    url_check("https://hooks.example.com/a2a?tenant=1")
    url_check("http://hooks.example.com:8443/a2a")


def test_a_public_address_literal_passes() -> None:
    url_check("https://93.184.215.14/hook")
    url_check("https://[2606:4700::1111]:8443/hook")


def test_an_unresolvable_host_is_refused_with_a_clear_reason() -> None:
    assert refusal("https://no-such-host.invalid/hook").startswith(
        "push URL host 'no-such-host.invalid' does not resolve"
    )


def test_a_push_config_accepts_a_name_that_does_not_resolve_yet(dns: FakeDns) -> None:
    """Config time lets DNS decide later (every delivery's connection is checked); a name that
    resolves to a refused address, and a refused literal, are refused as before."""
    push_url_validate("https://no-such-host.invalid/hook")
    dns.table["inside.example.com"] = ["10.0.0.5"]
    for url in ("https://inside.example.com/hook", "http://169.254.169.254/latest"):
        with pytest.raises(InvalidParamsError, match="is refused"):
            push_url_validate(url)


# --- url_check: the shape of the URL ---


@pytest.mark.parametrize(
    "url, start",
    [
        ("ftp://93.184.215.14/hook", "push URL scheme 'ftp' is not allowed"),
        ("file:///etc/passwd", "push URL scheme 'file' is not allowed"),
        ("gopher://93.184.215.14:6379/_INFO", "push URL scheme 'gopher' is not allowed"),
        ("javascript:alert(1)", "push URL scheme 'javascript' is not allowed"),
        ("//93.184.215.14/hook", "push URL must be an absolute http or https URL"),
        ("/relative/hook", "push URL must be an absolute http or https URL"),
        ("http:///hook", "push URL has no host"),
        ("http://user:secret@93.184.215.14/hook", "push URL must not carry a user name"),
        ("http://user@93.184.215.14/hook", "push URL must not carry a user name"),
        ("http://93.184.215.14:0/hook", "push URL port 0 is out of range"),
        ("http://93.184.215.14:70000/hook", "push URL port 70000 is out of range"),
        ("http://93.184.215.14:http/hook", "push URL is not a valid URL"),
        ("http://exa mple.com/hook", "push URL host 'exa%20mple.com' is not a valid host name"),
        ("http://[::1/hook", "push URL is not a valid URL"),
    ],
)
def test_malformed_urls_are_refused(url: str, start: str) -> None:
    assert refusal(url).startswith(start)


# --- the operator's allowlist ---


def test_an_allowlisted_host_name_passes_whatever_it_resolves_to(
    settings: Any, dns: FakeDns
) -> None:
    # given
    dns.table["hooks.internal"] = ["10.0.0.5", "fd12::5"]
    settings.A2A_PUSH_ALLOWED_HOSTS = ["hooks.internal"]

    # then: exact names, case-insensitive, a trailing dot ignored
    url_check("http://hooks.internal/a2a")
    url_check("http://HOOKS.Internal./a2a")
    dns.table["other.internal"] = ["10.0.0.5"]
    assert "a private address" in refusal("http://other.internal/a2a")
    dns.table["sub.hooks.internal"] = ["10.0.0.5"]
    assert "a private address" in refusal("http://sub.hooks.internal/a2a")


def test_localhost_passes_when_allowlisted(settings: Any) -> None:
    settings.A2A_PUSH_ALLOWED_HOSTS = ["localhost"]

    url_check("http://localhost:8000/hook")
    assert "a loopback address" in refusal("http://127.0.0.1:8000/hook")


def test_an_address_in_an_allowlisted_network_passes(settings: Any, dns: FakeDns) -> None:
    # given
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["10.0.0.0/8", "127.0.0.0/8", "::1/128"]
    dns.table["hooks.internal"] = ["10.20.30.40"]

    # then
    url_check("http://hooks.internal/a2a")
    url_check("http://127.0.0.1:8000/hook")
    url_check("http://[::1]:8000/hook")
    url_check("http://[::ffff:127.0.0.1]:8000/hook")  # the IPv4 inside is allowlisted
    url_check("http://localhost:8000/hook")
    # and nothing else
    assert "a private address" in refusal("http://192.168.1.1/hook")
    assert "a cloud metadata address" in refusal("http://169.254.169.254/")
    dns.table["half.internal"] = ["10.0.0.1", "172.16.0.1"]
    assert "resolves to 172.16.0.1, a private address" in refusal("http://half.internal/")


def test_the_allowlist_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("A2A_PUSH_ALLOWED_HOSTS", " LocalHost , hooks.example.com., ::1,")
    monkeypatch.setenv("A2A_PUSH_ALLOWED_NETWORKS", "127.0.0.0/8, ::1/128,10.1.2.3")

    assert settings_module._push_allowed_hosts("A2A_PUSH_ALLOWED_HOSTS") == [
        "localhost",
        "hooks.example.com",
        "::1",
    ]
    assert settings_module._push_allowed_networks("A2A_PUSH_ALLOWED_NETWORKS") == [
        "127.0.0.0/8",
        "::1/128",
        "10.1.2.3/32",
    ]


def test_the_allowlist_defaults_to_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("A2A_PUSH_ALLOWED_HOSTS", raising=False)
    monkeypatch.delenv("A2A_PUSH_ALLOWED_NETWORKS", raising=False)

    assert settings_module._push_allowed_hosts("A2A_PUSH_ALLOWED_HOSTS") == []
    assert settings_module._push_allowed_networks("A2A_PUSH_ALLOWED_NETWORKS") == []


@pytest.mark.parametrize("value", ["10.0.0.0/33", "10.0.0.1/8", "localhost", "10.0.0.0/8;"])
def test_a_bad_cidr_stops_start_up_naming_it(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("A2A_PUSH_ALLOWED_NETWORKS", f"127.0.0.0/8,{value}")

    with pytest.raises(ImproperlyConfigured, match="A2A_PUSH_ALLOWED_NETWORKS") as info:
        settings_module._push_allowed_networks("A2A_PUSH_ALLOWED_NETWORKS")
    assert repr(value) in str(info.value)


@pytest.mark.parametrize("value", ["localhost:8000", "https://hooks.example.com", "a b", "[::1]"])
def test_a_host_that_is_not_a_host_name_stops_start_up(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("A2A_PUSH_ALLOWED_HOSTS", value)

    with pytest.raises(ImproperlyConfigured, match="A2A_PUSH_ALLOWED_HOSTS"):
        settings_module._push_allowed_hosts("A2A_PUSH_ALLOWED_HOSTS")


# --- the guarded clients, against a real server on 127.0.0.1 ---


class Hooks(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str]]  # (path, Host header), set per server

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers["Host"]))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://10.0.0.1/")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class LocalServer:
    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        handler = type("BoundHooks", (Hooks,), {"seen": []})
        self.seen: list[tuple[str, str]] = handler.seen
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    s = LocalServer()
    yield s
    s.close()


def get(url: str, **kwargs: Any) -> httpx.Response:
    async def scenario() -> httpx.Response:
        async with guarded_async_client() as client:
            return await client.get(url, **kwargs)

    return asyncio.run(scenario())


def test_the_local_server_is_reachable_when_loopback_is_allowlisted(
    settings: Any, server: LocalServer
) -> None:
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]

    response = get(f"http://127.0.0.1:{server.port}/hook")

    assert (response.status_code, response.text) == (200, "ok")
    assert server.seen == [("/hook", f"127.0.0.1:{server.port}")]


def test_the_local_server_is_refused_at_connect_time_without_the_allowlist(
    server: LocalServer,
) -> None:
    # url_check is not called: the client must refuse on its own.
    with pytest.raises(UnsafeUrl, match="push URL address 127.0.0.1 is a loopback address"):
        get(f"http://127.0.0.1:{server.port}/hook")
    with pytest.raises(UnsafeUrl, match="a loopback address"):
        get(f"http://localhost:{server.port}/hook")

    assert server.seen == []


def test_agents_and_push_have_their_own_allowlists(settings: Any, server: LocalServer) -> None:
    # given loopback opened for agents' requests only
    settings.A2A_PUSH_ALLOWED_NETWORKS = []
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    url = f"http://127.0.0.1:{server.port}/hook"

    async def agent_get() -> httpx.Response:
        async with guarded_async_client(policy=AGENT) as client:
            return await client.get(url)

    # then an agent reaches it, at save time and at connect time; push does not
    url_check(url, policy=AGENT, what="base_url")
    assert asyncio.run(agent_get()).status_code == 200
    with pytest.raises(UnsafeUrl, match="push URL address 127.0.0.1 is a loopback address"):
        get(url)
    # and the other way round, with the agents' words and settings in the reason
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.A2A_AGENT_ALLOWED_NETWORKS = []
    assert get(url).status_code == 200
    with pytest.raises(UnsafeUrl) as refused:
        url_check(url, policy=AGENT, what="base_url")
    assert refused.value.reason == (
        "base_url address 127.0.0.1 is a loopback address; agent URLs must reach the public "
        "internet (an operator can allowlist it with A2A_AGENT_ALLOWED_NETWORKS or "
        "A2A_AGENT_ALLOWED_HOSTS)."
    )
    with pytest.raises(UnsafeUrl, match="agent URL address 127.0.0.1 is a loopback address"):
        asyncio.run(agent_get())
    assert server.seen == [("/hook", f"127.0.0.1:{server.port}")] * 2


def test_dns_rebinding_to_loopback_is_refused_at_connect_time(
    dns: FakeDns, server: LocalServer
) -> None:
    # given: the name was public when the config was created
    dns.table["rebind.example.com"] = ["93.184.215.14"]
    url = f"http://rebind.example.com:{server.port}/hook"
    url_check(url)

    # when: it resolves to loopback by delivery time
    dns.table["rebind.example.com"] = ["127.0.0.1"]

    # then
    with pytest.raises(UnsafeUrl, match="'rebind.example.com' resolves to 127.0.0.1, a loopback"):
        get(url)
    assert server.seen == []


def test_the_client_connects_to_the_checked_address_and_keeps_the_host_header(
    settings: Any, dns: FakeDns, server: LocalServer
) -> None:
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    dns.table["hooks.example.com"] = ["127.0.0.1"]

    response = get(f"http://hooks.example.com:{server.port}/hook")

    assert response.status_code == 200
    assert server.seen == [("/hook", f"hooks.example.com:{server.port}")]


def test_an_allowlisted_host_falls_back_to_its_next_address(
    settings: Any, dns: FakeDns, server: LocalServer
) -> None:
    # given: the first address refuses connections (nothing listens on ::1 for this port)
    settings.A2A_PUSH_ALLOWED_HOSTS = ["hooks.example.com"]
    dns.table["hooks.example.com"] = ["::1", "127.0.0.1"]

    response = get(f"http://hooks.example.com:{server.port}/hook")

    assert response.status_code == 200


def test_a_redirect_to_a_private_address_is_not_followed(
    settings: Any, server: LocalServer
) -> None:
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]

    response = get(f"http://127.0.0.1:{server.port}/redirect")

    assert response.status_code == 302
    assert response.headers["Location"] == "http://10.0.0.1/"
    assert server.seen == [("/redirect", f"127.0.0.1:{server.port}")]


def test_a_redirect_followed_anyway_is_refused_at_its_connect(
    settings: Any, server: LocalServer
) -> None:
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]

    with pytest.raises(UnsafeUrl, match="push URL address 10.0.0.1 is a private address"):
        get(f"http://127.0.0.1:{server.port}/redirect", follow_redirects=True)


def test_the_sync_client_is_guarded_too(settings: Any, server: LocalServer) -> None:
    url = f"http://127.0.0.1:{server.port}/redirect"
    with guarded_client() as client:
        with pytest.raises(UnsafeUrl, match="a loopback address"):
            client.get(url)

    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    with guarded_client() as client:
        response = client.get(url)
        with pytest.raises(UnsafeUrl, match="10.0.0.1 is a private address"):
            client.get(url, follow_redirects=True)

    assert response.status_code == 302
    assert response.headers["Location"] == "http://10.0.0.1/"


def test_the_clients_take_their_timeout_from_settings_and_refuse_bypasses(settings: Any) -> None:
    settings.A2A_PUSH_TIMEOUT_SECONDS = 2.5

    async def scenario() -> httpx.Timeout:
        async with guarded_async_client() as client:
            assert client.follow_redirects is False
            return client.timeout

    assert asyncio.run(scenario()) == httpx.Timeout(2.5)
    with guarded_client() as client:
        assert client.timeout == httpx.Timeout(2.5)
    for bypass in ("transport", "mounts", "proxy", "follow_redirects", "trust_env"):
        with pytest.raises(TypeError, match=bypass):
            guarded_async_client(**{bypass: None})


def test_tls_is_verified_against_the_host_name_not_the_address(
    settings: Any, dns: FakeDns, tmp_path: Path
) -> None:
    # given: a certificate for hooks.example.com only (no IP address in it)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("hooks.example.com")]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    client_tls = ssl.create_default_context(cadata=cert_pem.decode())
    server = LocalServer(tls=server_tls)
    settings.A2A_PUSH_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    dns.table["hooks.example.com"] = ["127.0.0.1"]
    dns.table["other.example.com"] = ["127.0.0.1"]

    async def fetch(host: str) -> httpx.Response:
        async with guarded_async_client(verify=client_tls) as client:
            return await client.get(f"https://{host}:{server.port}/hook")

    try:
        # when / then: the name in the URL is the one the certificate must match
        assert asyncio.run(fetch("hooks.example.com")).status_code == 200
        with pytest.raises(httpx.ConnectError, match="certificate"):
            asyncio.run(fetch("other.example.com"))
        with pytest.raises(httpx.ConnectError, match="certificate"):
            asyncio.run(fetch("127.0.0.1"))
    finally:
        server.close()
    assert server.seen == [("/hook", f"hooks.example.com:{server.port}")]


def test_a_connect_time_resolution_failure_is_a_retryable_connect_error() -> None:
    with pytest.raises(httpx.ConnectError, match="does not resolve"):
        get("http://gone.example.com/hook")
