#!/usr/bin/env bash
# `make test`: throwaway PostgreSQL and Redis, then the whole pytest suite against them.
# In CI (CI=true) every component the suite needs must be there: a missing one (PostgreSQL,
# Redis, Chromium for tests/browser, HAProxy for the load-balancer tests) stops the run at once, saying what to install.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/services.sh
# Only the servers this run starts are ever stopped: a run started from within another (the
# suite's own tests of this script) must not stop the servers of the run around it.
unset SERVICES_DIR
trap services_stop EXIT
# Chromium first: in CI its absence ends the run before anything is started.
if ! services_ensure_chromium && _svc_in_ci; then
  echo "test: stopping: CI=true and the browser tests need Chromium (see above)." >&2
  exit 1
fi
if ! services_ensure_haproxy && _svc_in_ci; then
  echo "test: stopping: CI=true and the load-balancer tests need HAProxy (see above)." >&2
  exit 1
fi
services_start || {
  echo "test: stopping: PostgreSQL and Redis are needed by the suite (see above)." >&2
  exit 1
}
export DJANGO_SECRET_KEY=test-only-secret
export A2A_VAR_DIR="$SERVICES_DIR/var"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected nothing: that is a failure of the suite, not a pass.
exit $status
