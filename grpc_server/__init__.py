"""The gRPC sidecar sharing the ORM (to come)."""
