#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis servers for the test suite, from local binaries.
#   source scripts/services.sh && services_start   # exports DATABASE_URL, REDIS_URL, ...
#   services_stop
# When a binary is missing and we are root with apt, it is installed; otherwise we say what to
# install. PostgreSQL refuses to run as root, so as root the servers run as user 'postgres'.
# Where the binaries are can be set (then nothing is installed): A2A_PG_BIN (the directory of
# initdb and pg_ctl), A2A_REDIS_SERVER, A2A_CHROMIUM_BIN (default /usr/bin/chromium),
# A2A_HAPROXY_BIN (default /usr/sbin/haproxy).

# In CI (CI=true) a component the suite needs and cannot have is an error, never a skip.
_svc_in_ci() {
  local ci=${CI:-}
  [ "${ci,,}" = true ]
}

_svc_find_pg_bin() {
  if [ -n "${A2A_PG_BIN:-}" ]; then
    [ -x "$A2A_PG_BIN/initdb" ] && [ -x "$A2A_PG_BIN/pg_ctl" ] && { echo "$A2A_PG_BIN"; return 0; }
    return 1
  fi
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

_svc_find_redis() {
  if [ -n "${A2A_REDIS_SERVER:-}" ]; then
    [ -x "$A2A_REDIS_SERVER" ] && { echo "$A2A_REDIS_SERVER"; return 0; }
    return 1
  fi
  command -v redis-server
}

_svc_apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "services: installing $* with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null
  else
    return 1
  fi
}

# Chromium for the browser tests (tests/browser), from Debian only: never a downloader such as
# `playwright install`. Without it (not root, no apt, install failed) those tests skip, and in
# CI they cannot run: the caller (scripts/test.sh) then stops. An A2A_CHROMIUM_BIN that was set
# is only checked, never installed.
A2A_CHROMIUM_BIN=${A2A_CHROMIUM_BIN:-/usr/bin/chromium}
export A2A_CHROMIUM_BIN  # tests/browser/conftest.py launches this one

services_ensure_chromium() {
  [ -x "$A2A_CHROMIUM_BIN" ] && return 0
  if [ "$A2A_CHROMIUM_BIN" = /usr/bin/chromium ] && [ "$(id -u)" = 0 ] &&
    command -v apt-get >/dev/null 2>&1; then
    echo "services: installing chromium with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    local install=(apt-get install -y -qq --no-install-recommends chromium)
    # Refresh the package lists only when they lack chromium (a clean machine) or are stale
    # (the install fails fetching a superseded version).
    { apt-cache show chromium >/dev/null 2>&1 && "${install[@]}" >/dev/null 2>&1; } ||
      { apt-get update -qq >/dev/null && "${install[@]}" >/dev/null; } || true  # errors shown
  fi
  [ -x "$A2A_CHROMIUM_BIN" ] && return 0
  local what="Chromium ($A2A_CHROMIUM_BIN) is missing"
  local how="install it as root with 'apt-get install --no-install-recommends chromium'"
  how="$how (Debian's package, not 'playwright install'), or set A2A_CHROMIUM_BIN to its path"
  if _svc_in_ci; then
    echo "services: CI=true and $what: the browser tests (tests/browser) cannot run; $how." >&2
  else
    echo "services: $what, browser tests will skip; $how." >&2
  fi
  return 1
}

# HAProxy (Debian's) for the tests that put a load balancer in front of the platform: the gRPC
# front that passes a call's authority on (deploy/haproxy-grpc.cfg). As for Chromium: installed
# when root with apt; otherwise those tests skip, and in CI the run stops.
A2A_HAPROXY_BIN=${A2A_HAPROXY_BIN:-/usr/sbin/haproxy}
export A2A_HAPROXY_BIN

services_ensure_haproxy() {
  [ -x "$A2A_HAPROXY_BIN" ] && return 0
  if [ "$A2A_HAPROXY_BIN" = /usr/sbin/haproxy ]; then
    _svc_apt_install haproxy || true  # errors shown
  fi
  [ -x "$A2A_HAPROXY_BIN" ] && return 0
  local what="HAProxy ($A2A_HAPROXY_BIN) is missing"
  local how="install it as root with 'apt-get install haproxy', or set A2A_HAPROXY_BIN to its path"
  if _svc_in_ci; then
    echo "services: CI=true and $what: the load-balancer tests cannot run; $how." >&2
  else
    echo "services: $what, load-balancer tests will skip; $how." >&2
  fi
  return 1
}

_svc_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

services_start() {
  local pg_bin redis_bin
  if [ -n "${A2A_PG_BIN:-}" ]; then
    pg_bin=$(_svc_find_pg_bin) || {
      echo "services: PostgreSQL cannot start: A2A_PG_BIN=$A2A_PG_BIN holds no initdb and" \
        "pg_ctl; point it at PostgreSQL's bin directory, or unset it." >&2
      return 1
    }
  else
    pg_bin=$(_svc_find_pg_bin) ||
      { _svc_apt_install postgresql && pg_bin=$(_svc_find_pg_bin); } || {
      echo "services: PostgreSQL cannot start: its server binaries (initdb, pg_ctl) are" \
        "missing; install them, e.g. 'sudo apt-get install postgresql', then run again." >&2
      return 1
    }
  fi
  if [ -n "${A2A_REDIS_SERVER:-}" ]; then
    redis_bin=$(_svc_find_redis) || {
      echo "services: Redis cannot start: A2A_REDIS_SERVER=$A2A_REDIS_SERVER is not an" \
        "executable; point it at redis-server, or unset it." >&2
      return 1
    }
  else
    redis_bin=$(_svc_find_redis) ||
      { _svc_apt_install redis-server && redis_bin=$(_svc_find_redis); } || {
      echo "services: Redis cannot start: redis-server is missing; install it, e.g." \
        "'sudo apt-get install redis-server'." >&2
      return 1
    }
  fi

  SERVICES_DIR=$(mktemp -d /tmp/a2a-test-services.XXXXXX)
  export SERVICES_DIR
  local run_as=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown postgres "$SERVICES_DIR"
    run_as=(runuser -u postgres --)
  fi
  SERVICES_RUN_AS=("${run_as[@]}")
  SERVICES_PG_BIN=$pg_bin
  local pg_port redis_port
  pg_port=$(_svc_free_port); redis_port=$(_svc_free_port)

  "${run_as[@]}" "$pg_bin/initdb" -D "$SERVICES_DIR/pg" -U postgres --auth=trust \
    --encoding=UTF8 --no-instructions >"$SERVICES_DIR/initdb.log" 2>&1 || {
      echo "services: initdb failed:" >&2; cat "$SERVICES_DIR/initdb.log" >&2; return 1; }
  "${run_as[@]}" "$pg_bin/pg_ctl" -D "$SERVICES_DIR/pg" -l "$SERVICES_DIR/pg.log" -w -t 60 \
    -o "-p $pg_port -k $SERVICES_DIR -c listen_addresses=127.0.0.1 -c fsync=off \
        -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" start \
    >/dev/null || {
      echo "services: PostgreSQL did not start:" >&2
      cat "$SERVICES_DIR/pg.log" >&2 2>/dev/null; return 1; }

  "${run_as[@]}" "$redis_bin" --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$SERVICES_DIR" --pidfile "$SERVICES_DIR/redis.pid" \
    --logfile "$SERVICES_DIR/redis.log" || { echo "services: Redis did not start" >&2; return 1; }
  local i ready=
  for i in $(seq 50); do
    python3 - "$redis_port" <<'PY' 2>/dev/null && { ready=1; break; }
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"PING\r\n"); sys.exit(0 if s.recv(16).startswith(b"+PONG") else 1)
PY
    sleep 0.1
  done
  # A daemonized redis-server that dies at once (port taken, bad option) still exits 0.
  [ -n "$ready" ] || {
    echo "services: Redis did not answer PING on port $redis_port:" >&2
    tail -n 20 "$SERVICES_DIR/redis.log" >&2 2>/dev/null || true
    return 1
  }

  export DATABASE_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
  export REDIS_URL="redis://127.0.0.1:$redis_port/0"
  export CELERY_BROKER_URL="redis://127.0.0.1:$redis_port/1"
  echo "services: PostgreSQL on $pg_port, Redis on $redis_port ($SERVICES_DIR)" >&2
}

services_stop() {
  [ -n "${SERVICES_DIR:-}" ] || return 0
  [ -f "$SERVICES_DIR/redis.pid" ] &&
    { kill "$(cat "$SERVICES_DIR/redis.pid")" 2>/dev/null || true; }
  "${SERVICES_RUN_AS[@]}" "$SERVICES_PG_BIN/pg_ctl" -D "$SERVICES_DIR/pg" -m immediate stop \
    >/dev/null 2>&1 || true
  rm -rf "$SERVICES_DIR"
  SERVICES_DIR=
}
