"""manage.py rungrpc: run the gRPC sidecar (both A2A services on one port)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand

from grpc_server.server import serve


class Command(BaseCommand):
    help = "Serve every hosted agent over gRPC (A2A v1.0 and v0.3) on A2A_GRPC_LISTEN."

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(serve())
