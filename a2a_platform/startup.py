"""What `make run` (scripts/run.sh) checks around starting the platform's processes: before,
that the ports they will listen on are free, said plainly before anything starts and before any
secret is printed; after, that every process answers, within a bound, before it prints where
the platform is and how to log in.

    python -m a2a_platform.startup free HOST:PORT HINT [HOST:PORT HINT ...]
    python -m a2a_platform.startup ready --seconds S --web URL --grpc HOST:PORT \\
        --celery NAME=NODE [NAME=NODE ...]

Both exit 0 when all is well; otherwise 1, having said what is wrong on standard error.
"""

from __future__ import annotations

import argparse
import errno
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from urllib.parse import urlsplit


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (IPv6 hosts in brackets) as (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def port_in_use(host: str, port: int) -> bool:
    """Whether another program listens on host:port (the test binds without SO_REUSEPORT, so a
    server that shares ports with that option is found too)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        socket.create_server((host, port), family=family).close()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return True
        raise
    return False


def free(pairs: list[str]) -> int:
    taken = 0
    for address, hint in zip(pairs[::2], pairs[1::2], strict=True):
        host, port = split_address(address)
        if port_in_use(host, port):
            print(
                f"make run: port {port} on {host} is already in use: stop what listens there, "
                f"or choose another port: {hint}",
                file=sys.stderr,
            )
            taken += 1
    return 1 if taken else 0


def _loopback(host: str) -> str:
    """Where to reach a server bound to `host` from this machine."""
    return {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)


def _web(url: str) -> Callable[[], str | None]:
    def probe() -> str | None:
        from django.conf import settings

        # The public host is always allowed (settings.ALLOWED_HOSTS); 127.0.0.1 may not be.
        host = urlsplit(settings.A2A_PUBLIC_BASE_URL).netloc
        request = urllib.request.Request(f"{url}/readyz", headers={"Host": host})
        try:
            with urllib.request.urlopen(request, timeout=5):
                return None
        except urllib.error.HTTPError as exc:
            return f"{url}/readyz answered {exc.code}: {exc.read()[:300].decode(errors='replace')}"
        except OSError as exc:
            return f"no answer on {url}/readyz ({getattr(exc, 'reason', exc)})"

    return probe


def _grpc(address: str) -> Callable[[], str | None]:
    host, port = split_address(address)
    host = _loopback(host)
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def probe() -> str | None:
        import grpc
        from django.conf import settings
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        if settings.A2A_GRPC_TLS_CERT_FILE:
            # Its certificate need not name this machine's loopback address: a connection
            # accepted is the answer.
            try:
                socket.create_connection(split_address(target), timeout=2).close()
            except OSError as exc:
                return f"no answer on {target} ({exc})"
            return None
        try:
            with grpc.insecure_channel(target) as channel:
                answer = health_pb2_grpc.HealthStub(channel).Check(
                    health_pb2.HealthCheckRequest(service=""), timeout=2
                )
        except grpc.RpcError as exc:
            return f"no answer on {target} ({exc.code().name})"
        serving = health_pb2.HealthCheckResponse
        if answer.status != serving.SERVING:
            return f"{target} says {serving.ServingStatus.Name(answer.status)}"
        return None

    return probe


def ready(seconds: float, web: str, grpc_address: str, celery: list[str]) -> int:
    """Wait until the web tier's /readyz answers 200, the sidecar's health service says SERVING
    and every Celery node (workers, and beat with remote control on) answers a ping."""
    from celery.utils.nodenames import host_format

    from a2a_platform.celery import app

    probes = {"web": _web(web), "grpc": _grpc(grpc_address)}
    nodes = {}
    for pair in celery:
        name, _, node = pair.partition("=")
        nodes[host_format(node)] = name
    why: dict[str, str] = {}
    deadline = time.monotonic() + seconds
    while True:
        for name, probe in list(probes.items()):
            if (reason := probe()) is None:
                del probes[name]
                why.pop(name, None)
            else:
                why[name] = reason
        if nodes:
            for reply in app.control.ping(destination=list(nodes), timeout=1.0):
                for node in reply:
                    why.pop(nodes.pop(node, ""), None)
            for node, name in nodes.items():
                why[name] = f"no answer to a ping of {node}"
        if not probes and not nodes:
            return 0
        if time.monotonic() > deadline:
            print(
                f"make run: not ready after {seconds:g} s (A2A_START_SECONDS): "
                + "; ".join(f"{name}: {reason}" for name, reason in why.items()),
                file=sys.stderr,
            )
            return 1
        time.sleep(0.3)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2a_platform.startup")
    commands = parser.add_subparsers(dest="command", required=True)
    free_parser = commands.add_parser("free", help="say which of the ports are taken")
    free_parser.add_argument("pairs", nargs="+", metavar="HOST:PORT HINT")
    ready_parser = commands.add_parser("ready", help="wait until every process answers")
    ready_parser.add_argument("--seconds", type=float, required=True)
    ready_parser.add_argument("--web", required=True, help="the web tier's base URL")
    ready_parser.add_argument("--grpc", required=True, help="the sidecar's host:port")
    ready_parser.add_argument("--celery", nargs="*", default=[], metavar="NAME=NODE")
    args = parser.parse_args(argv)
    if args.command == "free":
        if len(args.pairs) % 2:
            parser.error("free takes pairs: HOST:PORT HINT")
        return free(args.pairs)
    return ready(args.seconds, args.web.rstrip("/"), args.grpc, args.celery)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
