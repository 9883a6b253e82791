"""manage.py rungrpc: run the gRPC sidecar (both A2A services on one port)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from a2a_platform.startup import port_in_use, split_address
from agents.crypto import encryption_keys_check
from grpc_server.server import serve


class Command(BaseCommand):
    help = "Serve every hosted agent over gRPC (A2A v1.0 and v0.3) on A2A_GRPC_LISTEN."

    def handle(self, *args: Any, **options: Any) -> None:
        encryption_keys_check()
        # gRPC binds with SO_REUSEPORT: a port another sidecar holds would be shared without a
        # word, and one that another program holds ends in a traceback. Either is said here.
        host, port = split_address(settings.A2A_GRPC_LISTEN)
        if port_in_use(host, port):
            raise CommandError(
                f"Port {port} on {host} is already in use: stop what listens there, or set "
                "A2A_GRPC_LISTEN to another host:port (make run: GRPC_PORT=...)."
            )
        asyncio.run(serve())
