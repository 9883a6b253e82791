"""App config for the gRPC sidecar, which arrives with its own issue."""

from django.apps import AppConfig


class GrpcServerConfig(AppConfig):
    name = "grpc_server"
