#!/usr/bin/env bash
# `make test`: throwaway PostgreSQL and Redis, then the whole pytest suite against them.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/services.sh
trap services_stop EXIT
services_start
services_ensure_chromium || true
export DJANGO_SECRET_KEY=test-only-secret
export A2A_VAR_DIR="$SERVICES_DIR/var"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected nothing: that is a failure of the suite, not a pass.
exit $status
