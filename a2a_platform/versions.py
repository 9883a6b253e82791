"""The A2A versions the platform speaks: the names every binding parses into, and every app
stores (a push config remembers the version it was created in) and compares."""

V1_0 = "1.0"
V0_3 = "0.3"
V0_1 = "0.1"  # the early JSON-RPC dialect (tasks/send, sessionId, parts with `type`)
SUPPORTED_VERSIONS = (V1_0, V0_3, V0_1)
