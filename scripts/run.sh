#!/usr/bin/env bash
# `make run`: the whole platform on the embedded profile: daphne, Celery workers (agents, push,
# maintenance) and beat, and the gRPC sidecar. Each line a process writes is led by its name;
# where the platform is and how to log in is printed last, once every process answers.
set -euo pipefail
cd "$(dirname "$0")/.."
export A2A_VAR_DIR="${A2A_VAR_DIR:-$PWD/var}"
mkdir -p "$A2A_VAR_DIR"
PY=.venv/bin/python
PORT="${PORT:-8000}"
GRPC_PORT="${GRPC_PORT:-50051}"
for name in PORT GRPC_PORT; do
  [[ "${!name}" =~ ^[0-9]{1,5}$ ]] && [ "$((10#${!name}))" -ge 1 ] \
    && [ "$((10#${!name}))" -le 65535 ] || {
    echo "make run: $name must be a port number (1-65535), not '${!name}'" >&2
    exit 1
  }
done
# The sidecar's listening address, and the one the agent cards advertise (both settings are
# host:port, no scheme). The default agent (the card at the origin, gRPC calls that name no
# agent) is the public conformance agent. Every agent also answers at its own host name under
# .localhost, which browsers and most resolvers map to this machine.
export A2A_GRPC_LISTEN="${A2A_GRPC_LISTEN:-127.0.0.1:$GRPC_PORT}"
export A2A_GRPC_PUBLIC_ADDRESS="${A2A_GRPC_PUBLIC_ADDRESS:-127.0.0.1:$GRPC_PORT}"
export A2A_DEFAULT_AGENT="${A2A_DEFAULT_AGENT-${A2A_GRPC_DEFAULT_AGENT-demo/conformance}}"
host_pattern='{agent}--{tenant}.localhost'
export A2A_AGENT_HOST_PATTERN="${A2A_AGENT_HOST_PATTERN-$host_pattern}"
# v0.3 gRPC requests name no agent: the sidecar also serves each agent on a port of its own,
# agent N at the range's first port + N - 1, the address its card's v0.3 GRPC interfaces give
# (at 127.0.0.1, a name every machine resolves; no proxy needed). Empty: no such ports.
grpc_next=$((10#$GRPC_PORT + 1))
agent_ports=""
if [ "$grpc_next" -le 65535 ]; then
  agent_ports="$grpc_next-$((grpc_next + 99 > 65535 ? 65535 : grpc_next + 99))"
fi
export A2A_GRPC_AGENT_PORTS="${A2A_GRPC_AGENT_PORTS-$agent_ports}"
# A port another program holds is said before anything starts or any secret is printed.
taken=("127.0.0.1:$PORT" "PORT=$((10#$PORT + 1)) make run"
  "$A2A_GRPC_LISTEN" "GRPC_PORT=$((10#$GRPC_PORT + 1)) make run")
if [[ "$A2A_GRPC_AGENT_PORTS" =~ ^[0-9]+-[0-9]+$ ]]; then  # (malformed: the settings say so)
  # The range's first port; one of the others held is said by the sidecar, and skipped.
  taken+=("${A2A_GRPC_LISTEN%:*}:${A2A_GRPC_AGENT_PORTS%-*}"
    "GRPC_PORT=$((10#$GRPC_PORT + 200)) make run, or A2A_GRPC_AGENT_PORTS=<first>-<last>")
fi
$PY -m a2a_platform.startup free "${taken[@]}"
# Without DJANGO_SECRET_KEY, the var dir's key (made once; recorded in run.env below).
if [ -z "${DJANGO_SECRET_KEY:-}" ] && [ -z "${DJANGO_SECRET_KEY_FILE:-}" ]; then
  key_file="$($PY -m a2a_platform.secret_key "$A2A_VAR_DIR")"  # its own line: set -e sees a failure
  export DJANGO_SECRET_KEY_FILE="$key_file"
fi
export A2A_PUBLIC_BASE_URL="${A2A_PUBLIC_BASE_URL:-http://127.0.0.1:$PORT}"
# The development profile may push to webhooks on this machine (production allowlists nothing).
export A2A_PUSH_ALLOWED_NETWORKS="${A2A_PUSH_ALLOWED_NETWORKS-127.0.0.0/8,::1/128}"
export A2A_AGENT_ALLOWED_NETWORKS="${A2A_AGENT_ALLOWED_NETWORKS-127.0.0.0/8,::1/128}"
# ... and read token issuers' keys there (a Keycloak on this machine, docs/identity.md).
export A2A_IDENTITY_ALLOWED_NETWORKS="${A2A_IDENTITY_ALLOWED_NETWORKS-127.0.0.0/8,::1/128}"
export A2A_METRICS_OPEN="${A2A_METRICS_OPEN-true}"  # a development machine: /metrics without a token
# Runs still in flight when make run stops go back to the queue after this (see stop() below).
export A2A_WORKER_GRACE_SECONDS="${A2A_WORKER_GRACE_SECONDS-5}"
# Quiet unless LOG_LEVEL=DEBUG (docs/configuration.md, "Logs"): beat's banner, as the workers',
# and daphne's access log (a line per request, the start's own included).
log_level="${LOG_LEVEL:-INFO}"
if [ "${log_level^^}" != DEBUG ]; then
  export CELERY_QUIET=true A2A_ACCESS_LOG="${A2A_ACCESS_LOG-false}"
fi
# Beat, too, answers Celery's ping, so that the start can wait for it (its option
# --enable-remote-control, given by the environment).
export CELERY_BEAT_REMOTE_CONTROL=true
# Every setting this start derived, for the manage.py commands run by hand with the same var
# dir (the settings read it; a variable set in their environment wins), so that they say and
# allow what the running platform does: its URLs, the agents' allowlist, the default agent ...
settings=(A2A_PUBLIC_BASE_URL A2A_GRPC_LISTEN A2A_GRPC_PUBLIC_ADDRESS A2A_GRPC_AGENT_PORTS
  A2A_DEFAULT_AGENT A2A_AGENT_HOST_PATTERN A2A_PUSH_ALLOWED_NETWORKS A2A_AGENT_ALLOWED_NETWORKS
  A2A_IDENTITY_ALLOWED_NETWORKS A2A_METRICS_OPEN A2A_WORKER_GRACE_SECONDS A2A_ACCESS_LOG DJANGO_SECRET_KEY_FILE)
for name in "${settings[@]}"; do
  [ -z "${!name+set}" ] || printf '%s=%s\n' "$name" "${!name}"
done > "$A2A_VAR_DIR/.run.env.$$"
mv -f "$A2A_VAR_DIR/.run.env.$$" "$A2A_VAR_DIR/run.env"  # whole, for a command starting meanwhile

$PY manage.py migrate --noinput >/dev/null
# The demo's key (the same while it is valid: seed_demo keeps it in the var dir) and new
# passwords (a wrong DJANGO_SECRET_KEY stops here, in one line); they are printed with the rest
# once everything answers.
demo="$($PY manage.py seed_demo)"

# Ctrl-C or SIGTERM stops everything within seconds and exits 0: the agents worker hands runs
# still in flight back to the queue after A2A_WORKER_GRACE_SECONDS (5 here), and whatever has
# not stopped A2A_STOP_SECONDS (10) after the signal is killed, with its children. Each process
# runs in a process group of its own, so a Ctrl-C reaches this script alone (make run gives it
# the terminal: scripts/foreground.py), and each process is told to stop once, by stop().
pids=()
stop() {
  trap - EXIT INT TERM
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + ${A2A_STOP_SECONDS:-10}))
  while [ "$SECONDS" -lt "$deadline" ] && kill -0 "${pids[@]}" 2>/dev/null; do sleep 0.2; done
  for pid in "${pids[@]}"; do
    # Its whole group, also when the process itself has gone and left children behind.
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap 'stop; exit 0' INT TERM
trap stop EXIT
# What a process writes, each line led by its name. A Ctrl-C is not for this: it ends when the
# process has, after its last lines.
tag() {
  trap '' INT
  local lead line
  lead="$(printf '%-11s | ' "$1")"
  while IFS= read -r line || [ -n "$line" ]; do printf '%s%s\n' "$lead" "$line"; done
}
exec 3>&1 4>&2
tagged() { exec 1>&3 2>&4; exec > >(tag "$1") 2>&1; }  # what starts next writes to tag NAME
names=(web grpc agents push maintenance beat)
set -m
tagged web
$PY manage.py runweb --port "$PORT" & pids+=($!)
tagged grpc
$PY manage.py rungrpc & pids+=($!)
# One worker per queue: agent runs (many at once on one event loop), push deliveries, and
# maintenance (the reaper and the push dispatcher).
tagged agents
$PY manage.py celeryworker agents -n agents@%h & pids+=($!)
tagged push
$PY manage.py celeryworker push -n push@%h & pids+=($!)
tagged maintenance
$PY manage.py celeryworker maintenance -n maintenance@%h & pids+=($!)
tagged beat
.venv/bin/celery -A a2a_platform beat --scheduler a2a_platform.beat:Scheduler \
  --schedule "$A2A_VAR_DIR/celerybeat-schedule" & pids+=($!)
exec 1>&3 2>&4
# Until every process answers (bounded by A2A_START_SECONDS), nothing is said but what they say.
$PY -m a2a_platform.startup ready --seconds "${A2A_START_SECONDS:-60}" \
  --web "http://127.0.0.1:$PORT" --grpc "$A2A_GRPC_LISTEN" \
  --celery agents=agents@%h push=push@%h maintenance=maintenance@%h beat=celerybeat@%h & ready=$!
pids+=("$ready")
set +m

# The first process to end: which one (the one `wait -n` reaped is gone).
ended() {
  local i
  for i in "${!names[@]}"; do
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "${names[$i]}"; return; }
  done
  echo "a process"
}
status=0
wait -n || status=$?
if kill -0 "$ready" 2>/dev/null; then
  echo "make run: $(ended) exited (status $status) before everything answered; stopping." >&2
  exit 1
fi
[ "$status" = 0 ] || { echo "make run: stopping." >&2; exit 1; }  # the check said what is missing
line="================================================================================"
printf '\n== The A2A platform is up (Ctrl-C stops it) %s\n' "${line:44}"
printf '%s\n' "$demo"
own="${A2A_GRPC_AGENT_PORTS:+; v0.3 also on a port per agent, $A2A_GRPC_AGENT_PORTS}"
echo "gRPC (A2A v1.0 and v0.3, every agent; default ${A2A_DEFAULT_AGENT:-none}$own):" \
  "$A2A_GRPC_PUBLIC_ADDRESS"
echo "console: $A2A_PUBLIC_BASE_URL/console/  admin: $A2A_PUBLIC_BASE_URL/admin/ (logins above)"
printf '%s\n\n' "$line"
# Stop everything as soon as any one process exits.
status=0
wait -n || status=$?
echo "make run: $(ended) exited (status $status); stopping the others." >&2
exit 1
