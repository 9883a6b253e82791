#!/usr/bin/env bash
# `make run`: the whole platform on the embedded profile: daphne, Celery workers (agents, push,
# maintenance) and beat, and the gRPC sidecar.
set -euo pipefail
cd "$(dirname "$0")/.."
export A2A_VAR_DIR="${A2A_VAR_DIR:-$PWD/var}"
mkdir -p "$A2A_VAR_DIR"
PY=.venv/bin/python
# Without DJANGO_SECRET_KEY, the var dir's key (made once; recorded in run.env below).
if [ -z "${DJANGO_SECRET_KEY:-}" ] && [ -z "${DJANGO_SECRET_KEY_FILE:-}" ]; then
  key_file="$($PY -m a2a_platform.secret_key "$A2A_VAR_DIR")"  # its own line: set -e sees a failure
  export DJANGO_SECRET_KEY_FILE="$key_file"
fi
PORT="${PORT:-8000}"
GRPC_PORT="${GRPC_PORT:-50051}"
export A2A_PUBLIC_BASE_URL="${A2A_PUBLIC_BASE_URL:-http://127.0.0.1:$PORT}"
# The sidecar's listening address, and the one the agent cards advertise (both settings are
# host:port, no scheme). Calls that name no agent go to the public conformance agent.
export A2A_GRPC_LISTEN="${A2A_GRPC_LISTEN:-127.0.0.1:$GRPC_PORT}"
export A2A_GRPC_PUBLIC_ADDRESS="${A2A_GRPC_PUBLIC_ADDRESS:-127.0.0.1:$GRPC_PORT}"
export A2A_GRPC_DEFAULT_AGENT="${A2A_GRPC_DEFAULT_AGENT-demo/conformance}"
# What this start derived, for manage.py commands run by hand with the same var dir (the
# settings read it; variables set in the environment win).
{
  printf 'A2A_PUBLIC_BASE_URL=%s\nA2A_GRPC_PUBLIC_ADDRESS=%s\n' \
    "$A2A_PUBLIC_BASE_URL" "$A2A_GRPC_PUBLIC_ADDRESS"
  [ -z "${DJANGO_SECRET_KEY_FILE:-}" ] || printf 'DJANGO_SECRET_KEY_FILE=%s\n' "$DJANGO_SECRET_KEY_FILE"
} > "$A2A_VAR_DIR/run.env"
# The development profile may push to webhooks on this machine (production allowlists nothing).
export A2A_PUSH_ALLOWED_NETWORKS="${A2A_PUSH_ALLOWED_NETWORKS-127.0.0.0/8,::1/128}"
export A2A_METRICS_OPEN="${A2A_METRICS_OPEN-true}"  # a development machine: /metrics without a token

$PY manage.py migrate --noinput >/dev/null
$PY manage.py seed_demo
echo "gRPC (A2A v1.0 and v0.3, every agent; default ${A2A_GRPC_DEFAULT_AGENT:-none}): $A2A_GRPC_PUBLIC_ADDRESS"
echo "console: $A2A_PUBLIC_BASE_URL/console/  admin: $A2A_PUBLIC_BASE_URL/admin/ (logins above)"

# Ctrl-C or SIGTERM stops everything within seconds and exits 0: the agents worker hands runs
# still in flight back to the queue after A2A_WORKER_GRACE_SECONDS (5 here), and whatever has
# not stopped A2A_STOP_SECONDS (10) after the signal is killed, with its children.
export A2A_WORKER_GRACE_SECONDS="${A2A_WORKER_GRACE_SECONDS-5}"
pids=()
stop() {
  trap - EXIT INT TERM
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + ${A2A_STOP_SECONDS:-10}))
  while [ "$SECONDS" -lt "$deadline" ] && kill -0 "${pids[@]}" 2>/dev/null; do sleep 0.2; done
  for pid in "${pids[@]}"; do
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
$PY manage.py runweb --port "$PORT" & pids+=($!)
$PY manage.py rungrpc & pids+=($!)
# One worker per queue: agent runs (many at once on one event loop), push deliveries, and
# maintenance (the reaper and the push dispatcher).
$PY manage.py celeryworker agents --loglevel=INFO -n agents@%h & pids+=($!)
$PY manage.py celeryworker push --loglevel=INFO -n push@%h & pids+=($!)
$PY manage.py celeryworker maintenance --loglevel=INFO -n maintenance@%h & pids+=($!)
.venv/bin/celery -A a2a_platform beat --loglevel=INFO \
  --schedule "$A2A_VAR_DIR/celerybeat-schedule" & pids+=($!)
# Stop everything as soon as any one process exits.
wait -n
