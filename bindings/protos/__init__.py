"""Our own protobuf declarations for the gRPC binding (messages.proto, service.proto) and the
modules protoc generates from them (generate.sh regenerates those; they are checked in)."""
