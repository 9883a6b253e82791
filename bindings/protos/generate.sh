#!/usr/bin/env bash
# Regenerate messages_pb2.py and service_pb2.py (and their .pyi) from the .proto files here,
# with grpc_tools.protoc from the project's virtualenv. Run from anywhere; check in the result.
#
# The a2a-sdk's v0.3 proto is registered as `a2a_v0_3.proto` (top level), so protoc writes
# `import a2a_v0_3_pb2`; the import is pointed at the module the SDK ships it in.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
site="$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
tools="$("$python" -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')"
"$python" -m grpc_tools.protoc \
  -I . -I "$site/a2a/compat/v0_3" -I "$site" -I "$tools" \
  --python_out=. --pyi_out=. \
  bindings/protos/messages.proto bindings/protos/service.proto
for generated in bindings/protos/*_pb2.py bindings/protos/*_pb2.pyi; do
  sed -i 's/^import a2a_v0_3_pb2 as /from a2a.compat.v0_3 import a2a_v0_3_pb2 as /' "$generated"
  { echo "# ruff: noqa"; cat "$generated"; } > "$generated.tmp" && mv "$generated.tmp" "$generated"
done
"$root/.venv/bin/ruff" format --quiet bindings/protos/
