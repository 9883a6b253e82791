"""Settings, read from environment variables only (see docs/configuration.md).

Every value has a default that suits the embedded profile (SQLite, filesystem broker,
in-memory channel layer); production sets DATABASE_URL, CELERY_BROKER_URL and REDIS_URL.
A malformed value raises ImproperlyConfigured at start-up instead of being guessed.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from a2a_platform.hosts import AllowedHosts
from a2a_platform.secret_key import var_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("A2A_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env()

# Every setting `make run` (scripts/run.sh) derived when it last started with this var dir (the
# public URL and gRPC addresses from its ports, the key file, the loopback allowlists, the host
# pattern, the default agent, ...), so that a command run by hand in another shell (the
# README's `manage.py create_agent ...`) says and allows what the running platform does.
# Variables set in the environment win.
if (VAR_DIR / "run.env").is_file():
    environ.Env.read_env(str(VAR_DIR / "run.env"))


def _secret_file(file_name: str, subject: str) -> str:
    """The secret in file `file_name`; `subject` names the file in errors."""
    try:
        value = Path(file_name).read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(f"{subject} cannot be read: {exc}") from exc
    if not value:
        raise ImproperlyConfigured(f"{subject} is empty.")
    return value


def _secret(name: str, default: str | None = None) -> str:
    """A secret from NAME, or from the file named by NAME_FILE."""
    file_name = env.str(f"{name}_FILE", default="")
    if file_name:
        return _secret_file(file_name, f"{name}_FILE={file_name!r}")
    value = env.str(name, default=default)
    if not value:
        raise ImproperlyConfigured(f"Set {name} (or {name}_FILE) to a non-empty value.")
    return value


def _positive_float(name: str, default: float, *, allow_zero: bool = False) -> float:
    # Not env.float: django-environ strips non-digits, so "2m" would quietly become 2.
    raw = env.str(name, default=str(default)).strip()
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds, got {raw!r}.") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        what = "a finite number, 0 or more" if allow_zero else "a positive finite number"
        raise ImproperlyConfigured(f"{name} must be {what}, got {raw!r}.")
    return value


def _positive_int(name: str, default: int, *, allow_zero: bool = False) -> int:
    raw = env.str(name, default=str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}.") from None
    if value < 0 or (value == 0 and not allow_zero):
        raise ImproperlyConfigured(
            f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {raw!r}."
        )
    return value


DEBUG = env.bool("DJANGO_DEBUG", default=False)
if "DJANGO_SECRET_KEY" in os.environ or "DJANGO_SECRET_KEY_FILE" in os.environ:
    SECRET_KEY = _secret("DJANGO_SECRET_KEY")  # set, even if empty: that is a mistake to name
elif not (env.str("DATABASE_URL", default="") or env.str("DATABASE_URL_FILE", default="")):
    # The embedded profile: the var dir's key, made on first use (a2a_platform/secret_key.py).
    _key_file = var_secret_key(VAR_DIR)
    SECRET_KEY = _secret_file(str(_key_file), f"The key file {_key_file} (delete it for a new key)")
elif DEBUG:
    SECRET_KEY = "insecure-dev-key"
else:
    raise ImproperlyConfigured(
        "Set DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE): with DATABASE_URL set (the "
        "production profile) the platform makes no key of its own."
    )

A2A_PUBLIC_BASE_URL = env.str("A2A_PUBLIC_BASE_URL", default="http://127.0.0.1:8000").rstrip("/")
_public = urlsplit(A2A_PUBLIC_BASE_URL)
if _public.scheme not in ("http", "https") or not _public.hostname:
    raise ImproperlyConfigured(
        f"A2A_PUBLIC_BASE_URL must be an absolute http(s) URL, got {A2A_PUBLIC_BASE_URL!r}."
    )
# Agents' own host names (agents/hosts.py): `{agent}` and `{tenant}` stand for the slugs, as in
# `{agent}--{tenant}.agents.example.com`. On such a host the agent is the whole server (its card
# at /.well-known/agent-card.json, JSON-RPC and REST v1.0 at /, REST v0.3 at /v1/). Unset: agents
# live only under /a2a/<tenant>/<agent>/ (and at their custom domains, if any).
A2A_AGENT_HOST_PATTERN = env.str("A2A_AGENT_HOST_PATTERN", default="").strip().lower()
if A2A_AGENT_HOST_PATTERN and (
    A2A_AGENT_HOST_PATTERN.count("{agent}") != 1
    or A2A_AGENT_HOST_PATTERN.count("{tenant}") != 1
    or not re.fullmatch(r"[a-z0-9.{}-]+", A2A_AGENT_HOST_PATTERN)
    or "." not in A2A_AGENT_HOST_PATTERN.rpartition("}")[2]
):
    raise ImproperlyConfigured(
        "A2A_AGENT_HOST_PATTERN must be a host name holding {agent} and {tenant} once each, "
        "followed by a domain (e.g. '{agent}--{tenant}.agents.example.com'), got "
        f"{A2A_AGENT_HOST_PATTERN!r}."
    )
# The domain every pattern host is under (`.agents.example.com`), allowed below.
A2A_AGENT_HOST_DOMAIN = (
    "." + A2A_AGENT_HOST_PATTERN.rpartition("}")[2].partition(".")[2]
    if A2A_AGENT_HOST_PATTERN
    else ""
)
# The public host is always allowed: cards hand out URLs on it; so is the agents' domain. An
# agent's custom domain is allowed once agents/hosts.py has found it registered (AllowedHosts).
ALLOWED_HOSTS = AllowedHosts(
    [_public.hostname, *([A2A_AGENT_HOST_DOMAIN] if A2A_AGENT_HOST_DOMAIN else [])]
    + env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1"])
)
CSRF_TRUSTED_ORIGINS = env.list(
    "DJANGO_CSRF_TRUSTED_ORIGINS", default=[f"{_public.scheme}://{_public.netloc}"]
)
# Behind a proxy that terminates TLS: with A2A_TRUST_X_FORWARDED_PROTO, a request the proxy
# marks `X-Forwarded-Proto: https` counts as secure (absolute URLs, such as the console's
# invitation links, are https). Set it only when the proxy always sets or strips that header:
# otherwise a client could claim https. Served on https, the console's cookies are Secure.
if env.bool("A2A_TRUST_X_FORWARDED_PROTO", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _public.scheme == "https"
# `check --deploy` asks for two things the platform leaves to the proxy in front: it speaks
# plain HTTP only, so TLS ends there, and there http is redirected to https and HSTS sent
# (docs/production.md, section 2). A redirect here would also send compose's healthcheck
# (http://127.0.0.1:8000/healthz) to an https port that does not exist.
SILENCED_SYSTEM_CHECKS = [
    "security.W004",  # SECURE_HSTS_SECONDS unset: the proxy sends Strict-Transport-Security
    "security.W008",  # SECURE_SSL_REDIRECT off: the proxy redirects http to https
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "agents",
    "tasks_app",
    "push_app",
    "grpc_server",
    "console",
    "audit",
]

LOGIN_URL = "console:login"
LOGIN_REDIRECT_URL = "console:overview"
LOGOUT_REDIRECT_URL = "console:login"

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Who a console or admin request acts as, for the audit log (read only when it records).
    "audit.context.AuditContext",
    # Before anything reads a console or admin form (CSRF's check does, in its view hook).
    "console.refusals.ConsoleBodyLimit",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "a2a_platform.urls"
ASGI_APPLICATION = "a2a_platform.asgi.application"
WSGI_APPLICATION = "a2a_platform.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url_config(
        _secret("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}")
    ),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web, worker and beat processes read while one of them writes;
    # IMMEDIATE transactions take the write lock up front instead of failing mid-way.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
        }
    )
else:
    # Django's backend, with a pooled connection the server ended replaced without a round
    # trip (a2a_platform/postgresql/base.py).
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["ENGINE"] = "a2a_platform.postgresql"
    # ASGI and the workers' asyncio loops open and close a connection per ORM call; a pool
    # keeps those cheap. (A pool replaces persistent connections: CONN_MAX_AGE stays 0.)
    if env.bool("DATABASE_POOL", default=True):
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": _positive_int("DATABASE_POOL_MIN_SIZE", 2),
            "max_size": _positive_int("DATABASE_POOL_MAX_SIZE", 20),
            "timeout": 20,
        }
    else:
        DATABASES["default"]["CONN_MAX_AGE"] = _positive_int(
            "DATABASE_CONN_MAX_AGE", 0, allow_zero=True
        )
    # The statements of the hot paths (tasks_app.rowsql.cursor) bind their parameters on the
    # server, and each connection prepares one once it has run it five times: PostgreSQL then
    # parses and plans it once. The ORM's own queries bind in the client and are never
    # prepared. Off for a proxy that pools by transaction and cannot carry prepared statements.
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = (
        5 if env.bool("DATABASE_PREPARED_STATEMENTS", default=True) else None
    )
    # A health check is a round trip on every checkout from the pool: off by default, as the
    # backend sees without one a pooled connection the server ended (a restart), and the pool
    # drops a connection that broke while in use. On for persistent connections.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.bool(
        "DATABASE_HEALTH_CHECKS", default="pool" not in DATABASES["default"].get("OPTIONS", {})
    )

# ORM calls from async code (requests, streams, agent runs) run on this many threads per
# process (a2a_platform.db); with a pool, it must leave connections for sync views.
A2A_DB_THREADS = _positive_int("A2A_DB_THREADS", 8)
# An agent worker's (tasks_app.runtime); its heartbeat has a thread of its own besides. Fewer
# threads contend less for the GIL with its event loop and work off a backlog of runs faster,
# more keep each run's chain of writes shorter (docs/decisions.md, "Database threads").
A2A_WORKER_DB_THREADS = _positive_int("A2A_WORKER_DB_THREADS", 8)
_pool = DATABASES["default"].get("OPTIONS", {}).get("pool")
for _name, _threads in (
    ("A2A_DB_THREADS", A2A_DB_THREADS),
    ("A2A_WORKER_DB_THREADS", A2A_WORKER_DB_THREADS),
):
    if _pool and _threads > _pool["max_size"] - 2:
        raise ImproperlyConfigured(
            f"{_name} ({_threads}) must be at most DATABASE_POOL_MAX_SIZE - 2 "
            f"({_pool['max_size'] - 2}): each database thread may hold a pooled connection, "
            "and synchronous views and the heartbeat's own thread need some too."
        )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- The REST binding's OpenAPI schema (/api/schema/) and Swagger UI (/api/docs/) ---
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "bindings.openapi.A2ARestSchema",
    # The A2A views authenticate with API keys themselves; the schema and docs pages are
    # public. DRF's defaults (session and Basic auth) would only add a password-guessing door.
    "DEFAULT_AUTHENTICATION_CLASSES": [],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "A2A platform: REST (HTTP+JSON) binding",
    "DESCRIPTION": (
        "The A2A HTTP+JSON/REST binding of every hosted agent, at /a2a/{tenant}/{agent}/: "
        "v1.0 directly under the agent's root, v0.3 under its v1/ path. Bodies are the "
        "proto-JSON of the A2A protos (v0.3 components are prefixed V03); errors are "
        "google.rpc.Status bodies. JSON-RPC (POST to the agent's root) and the agent cards "
        "(.well-known/agent-card.json) are not described here."
    ),
    "VERSION": "1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "PREPROCESSING_HOOKS": ["bindings.openapi.only_rest_binding"],
    # Swagger UI from drf-spectacular-sidecar, served by the docs view itself: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {
        "deepLinking": True,
        "displayOperationId": True,
        "persistAuthorization": True,
        "validatorUrl": None,  # else Swagger UI asks validator.swagger.io
    },
}

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Channels: Redis when REDIS_URL is set, else in-process (log polling is the fallback). ---
REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "a2a_platform.channel_layer.PubSubChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# daphne processes of the web tier (manage.py runweb): one per core with Redis; the in-memory
# channel layer cannot cross processes, so without REDIS_URL there is one.
A2A_WEB_PROCESSES = _positive_int("A2A_WEB_PROCESSES", (os.cpu_count() or 1) if REDIS_URL else 1)

# --- Celery ---
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # The default 1 s poll of the queue folder would add up to a second to every task.
        "polling_interval": 0.05,
    }
    for _sub in ("queue", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Three queues, each with its own workers (`manage.py celeryworker agents|push|maintenance`),
# so a busy agent pool never delays a webhook or the reaper.
CELERY_TASK_QUEUES = [Queue("agents"), Queue("push"), Queue("maintenance")]
CELERY_TASK_DEFAULT_QUEUE = "maintenance"
CELERY_TASK_ROUTES = {
    "tasks_app.tasks.run_agent_task": {"queue": "agents"},
    "tasks_app.tasks.cancel_outside_run_task": {"queue": "agents"},
    "push_app.tasks.push_deliver_task": {"queue": "push"},
    "tasks_app.tasks.reap_stuck_tasks_task": {"queue": "maintenance"},
    "tasks_app.tasks.delete_expired_tasks_task": {"queue": "maintenance"},
    "audit.tasks.delete_expired_audit_events_task": {"queue": "maintenance"},
    "push_app.tasks.push_dispatch_due_task": {"queue": "maintenance"},
}

# --- The agent runtime (tasks_app.runtime): one event loop per worker process ---
# Agent runs in flight at once in one `agents` worker process (its thread pool's size; the
# broker prefetches as many). A run awaiting a model costs about 64 KiB; lower it for agents
# that compute rather than wait.
A2A_WORKER_MAX_RUNS = _positive_int("A2A_WORKER_MAX_RUNS", 1000)
# On SIGTERM, in-flight runs get this long to finish; then their claims go back to the queue.
A2A_WORKER_GRACE_SECONDS = _positive_float("A2A_WORKER_GRACE_SECONDS", 20.0)
# --- Fair share between tenants (docs/limits.md) ---
# A tenant has at most this many runs handed to the workers at once (queued in the broker or
# running), times its plan's weight; the rest wait in its own lane in PostgreSQL and are handed
# over, oldest first, as its runs end. So one tenant's backlog never stands in the broker's
# queue in front of another tenant's runs. Keep it below A2A_WORKER_MAX_RUNS times the agents
# workers, so a burst cannot fill every worker; 0 turns lanes off (every run goes to the
# broker at once, first come first served).
A2A_LANE_WINDOW = _positive_int("A2A_LANE_WINDOW", 50, allow_zero=True)
# The window is a share: it applies only while tenants compete, that is while another tenant
# has sent a message within this many seconds (the processes that serve sends share what they
# see through the database, once a second: a tenant seen by any of them counts), and a tenant
# alone has the workers to itself, as without lanes. 0: the window always applies, a tenant
# alone too. Caps (running_runs, agent_running_runs) always hold.
A2A_LANE_CONTENTION_SECONDS = _positive_float("A2A_LANE_CONTENTION_SECONDS", 60.0, allow_zero=True)
# A new task whose run has waited in its lane this long says why in its status message (once).
A2A_LANE_NOTE_SECONDS = _positive_float("A2A_LANE_NOTE_SECONDS", 10.0)
# The plan (by name) of tenants that have none; "" for no limits.
A2A_DEFAULT_PLAN = env.str("A2A_DEFAULT_PLAN", default="")
# Usage metering (agents.usage, docs/usage.md): each process counts what its tenants use in
# memory and adds it to the per-day rows every this many seconds (and when it exits). A
# process killed outright loses at most this long of counts; shorter costs one more INSERT
# per process per interval.
A2A_USAGE_FLUSH_SECONDS = _positive_float("A2A_USAGE_FLUSH_SECONDS", 5.0)
# The audit log (audit.failures, docs/audit.md): each process counts the credentials its agents
# refused in memory and adds them to the log's hourly rows every this many seconds (and when
# it exits).
A2A_AUDIT_FLUSH_SECONDS = _positive_float("A2A_AUDIT_FLUSH_SECONDS", 5.0)
# Threads of a push worker process (each delivery is one blocking HTTP request).
A2A_PUSH_WORKER_CONCURRENCY = _positive_int("A2A_PUSH_WORKER_CONCURRENCY", 8)

# --- A2A behaviour ---
A2A_BLOCKING_TIMEOUT_SECONDS = _positive_float("A2A_BLOCKING_TIMEOUT_SECONDS", 60.0)
A2A_CANCEL_TIMEOUT_SECONDS = _positive_float("A2A_CANCEL_TIMEOUT_SECONDS", 10.0)
# A worker renews the leases of all its runs every heartbeat (one UPDATE); a run whose lease
# lapsed (its worker died) is failed by the reaper: with the defaults within about 15 s.
A2A_TASK_LEASE_SECONDS = _positive_float("A2A_TASK_LEASE_SECONDS", 10.0)
A2A_WORKER_HEARTBEAT_SECONDS = _positive_float(
    "A2A_WORKER_HEARTBEAT_SECONDS", A2A_TASK_LEASE_SECONDS / 5
)
if A2A_WORKER_HEARTBEAT_SECONDS > A2A_TASK_LEASE_SECONDS / 3:
    raise ImproperlyConfigured(
        "A2A_WORKER_HEARTBEAT_SECONDS must be at most a third of A2A_TASK_LEASE_SECONDS, so a "
        "live worker renews a lease at least twice before it lapses."
    )
A2A_REAPER_INTERVAL_SECONDS = _positive_float("A2A_REAPER_INTERVAL_SECONDS", 5.0)
# A run no worker claimed for this long is queued again (the broker may have lost it). Runs
# queued before the broker (Redis) last started are queued again at once, on the reaper's next
# round after it is back (tasks_app.services.tasks_requeue_lost_jobs).
A2A_REQUEUE_AFTER_SECONDS = _positive_float("A2A_REQUEUE_AFTER_SECONDS", 300.0)
# A SendMessage that repeats a messageId its caller already sent to the agent gets the first
# send's task (a client retrying after a lost answer), for this long after the first; 0: ids
# are not remembered, and every send makes a new task or turn.
A2A_MESSAGE_ID_RETENTION_SECONDS = _positive_int(
    "A2A_MESSAGE_ID_RETENTION_SECONDS", 24 * 3600, allow_zero=True
)
# Tasks that ended (completed, failed, canceled, rejected) longer ago than this many days are
# deleted with everything they hold (history, artifacts, events, push configs and deliveries),
# by beat's hourly job; 0 keeps every task (docs/capacity.md).
A2A_TASK_RETENTION_DAYS = _positive_int("A2A_TASK_RETENTION_DAYS", 0, allow_zero=True)
A2A_POLL_INTERVAL_SECONDS = _positive_float("A2A_POLL_INTERVAL_SECONDS", 0.2)
# SSE comment lines on idle streams, so proxies do not cut them.
A2A_SSE_KEEPALIVE_SECONDS = _positive_float("A2A_SSE_KEEPALIVE_SECONDS", 15.0)
if A2A_TASK_LEASE_SECONDS < 1:
    raise ImproperlyConfigured(
        "A2A_TASK_LEASE_SECONDS must be at least 1: a shorter lease lapses on a busy machine "
        "while its worker is alive."
    )
A2A_MAX_REQUEST_BYTES = _positive_int("A2A_MAX_REQUEST_BYTES", 10 * 1024 * 1024)
A2A_MAX_BATCH_REQUESTS = _positive_int("A2A_MAX_BATCH_REQUESTS", 50)
# How long a process may use the agent and API-key rows it read (agents.cache): a revoked key
# or a deactivated agent or tenant stops working in every process within this time. 0: no cache.
try:
    _auth_cache_off = float(env.str("A2A_AUTH_CACHE_SECONDS", default="1")) == 0
except ValueError:
    _auth_cache_off = False  # not a number: _positive_float names the setting
A2A_AUTH_CACHE_SECONDS = 0.0 if _auth_cache_off else _positive_float("A2A_AUTH_CACHE_SECONDS", 1.0)
# Dotted paths of AgentExecutor classes tenants may pick for the `python` executor kind.
A2A_PYTHON_EXECUTORS = env.list("A2A_PYTHON_EXECUTORS", default=[])
# --- Limits on what a request may carry (docs/configuration.md, "Limits") ---
# The A2A bindings (and webhook agents' callbacks) read their bodies themselves, up to this.
DATA_UPLOAD_MAX_MEMORY_SIZE = A2A_MAX_REQUEST_BYTES
# The console's and the admin's forms: the largest, the admin's agent form with every field at
# its limit (agents.limits) in a script of three-byte characters, is about 3.2 MB form-encoded;
# what is larger is no person's form. Refused before it is parsed (console.refusals).
A2A_CONSOLE_MAX_REQUEST_BYTES = _positive_int("A2A_CONSOLE_MAX_REQUEST_BYTES", 4 * 1024 * 1024)
# Django's defaults, named here because the refusal pages quote them: fields in one query or
# form (the agent forms have about 50), files in one form (the console takes none).
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
DATA_UPLOAD_MAX_NUMBER_FILES = 100


def _host_port(name: str, default: str) -> str:
    """`host:port` (no scheme), as gRPC addresses are written; IPv6 hosts in brackets."""
    raw = env.str(name, default=default).strip()
    host, sep, port = raw.rpartition(":")
    if not sep or not host or "://" in raw or not port.isdigit() or not 0 < int(port) < 65536:
        raise ImproperlyConfigured(f"{name} must be host:port (no scheme), got {raw!r}.")
    return raw


def _agent_path(name: str) -> str:
    raw = env.str(name, default="").strip()
    if raw and (raw.count("/") != 1 or not all(raw.split("/"))):
        raise ImproperlyConfigured(f"{name} must be <tenant-slug>/<agent-slug>, got {raw!r}.")
    return raw


# --- Encryption at rest (push credentials, signing keys; agents/crypto.py) ---
# Comma-separated Fernet keys: the first encrypts, every one decrypts, so a key is rotated by
# putting a new one first (and dropped once nothing is encrypted with it). Unset, one key is
# derived from DJANGO_SECRET_KEY: fine for development, but production sets its own, or
# changing the secret key makes every stored secret unreadable.
A2A_ENCRYPTION_KEYS: list[str] = []
if env.str("A2A_ENCRYPTION_KEYS", default="") or env.str("A2A_ENCRYPTION_KEYS_FILE", default=""):
    A2A_ENCRYPTION_KEYS = [
        k.strip() for k in _secret("A2A_ENCRYPTION_KEYS").split(",") if k.strip()
    ]
    try:
        from cryptography.fernet import Fernet

        for _key in A2A_ENCRYPTION_KEYS:
            Fernet(_key)
    except ValueError:
        raise ImproperlyConfigured(
            "A2A_ENCRYPTION_KEYS must be comma-separated Fernet keys (32 url-safe base64 "
            "bytes each, as Fernet.generate_key() makes them)."
        ) from None
    if not A2A_ENCRYPTION_KEYS:
        raise ImproperlyConfigured("A2A_ENCRYPTION_KEYS names no key.")

# --- The gRPC sidecar (manage.py rungrpc) ---
# Where it listens, and the address the cards advertise (the GRPC interfaces appear in cards
# only when A2A_GRPC_PUBLIC_ADDRESS is set: a deployment without the sidecar offers none).
A2A_GRPC_LISTEN = _host_port("A2A_GRPC_LISTEN", "127.0.0.1:50051")
A2A_GRPC_PUBLIC_ADDRESS = (
    _host_port("A2A_GRPC_PUBLIC_ADDRESS", "") if env.str("A2A_GRPC_PUBLIC_ADDRESS", "") else ""
)
# The default agent (`<tenant>/<agent>`): its card is the one at the platform's own origin
# (/.well-known/agent-card.json) and gRPC calls that name no agent go to it. Unset: the origin's
# card is 404 and such calls are refused. A2A_GRPC_DEFAULT_AGENT is its earlier name.
A2A_DEFAULT_AGENT = _agent_path("A2A_DEFAULT_AGENT") or _agent_path("A2A_GRPC_DEFAULT_AGENT")


def _port_range(name: str) -> tuple[int, int] | None:
    """`<first>-<last>`: ports, first <= last; unset or empty: None."""
    raw = env.str(name, default="").strip()
    if not raw:
        return None
    found = re.fullmatch(r"([0-9]{1,5})-([0-9]{1,5})", raw)
    if not (found and 0 < int(found[1]) <= int(found[2]) < 65536):
        raise ImproperlyConfigured(
            f"{name} must be <first>-<last>, two port numbers (1-65535) with the first not "
            f"above the last, got {raw!r}."
        )
    return int(found[1]), int(found[2])


# A port of the sidecar's own for each agent, from a range: agent N (its id) at the range's
# first port + N - 1, served on A2A_GRPC_LISTEN's host with that agent bound, and advertised
# in its card's v0.3 GRPC interfaces at A2A_GRPC_PUBLIC_ADDRESS's host. v0.3 gRPC requests
# carry no `tenant`, and grpcio shows Python servers no `:authority`: the port is what names
# the agent when no front copies the authority (docs/decisions.md). Off unless set: `make run`
# sets the ports just above GRPC_PORT; production names agents by host behind its front.
A2A_GRPC_AGENT_PORTS = _port_range("A2A_GRPC_AGENT_PORTS")
if A2A_GRPC_AGENT_PORTS and (
    A2A_GRPC_AGENT_PORTS[0] <= int(A2A_GRPC_LISTEN.rpartition(":")[2]) <= A2A_GRPC_AGENT_PORTS[1]
):
    raise ImproperlyConfigured(
        f"A2A_GRPC_AGENT_PORTS ({A2A_GRPC_AGENT_PORTS[0]}-{A2A_GRPC_AGENT_PORTS[1]}) holds "
        f"the port of A2A_GRPC_LISTEN ({A2A_GRPC_LISTEN}), which serves every agent: choose "
        "a range beside it."
    )
A2A_GRPC_TLS_CERT_FILE = env.str("A2A_GRPC_TLS_CERT_FILE", default="")
A2A_GRPC_TLS_KEY_FILE = env.str("A2A_GRPC_TLS_KEY_FILE", default="")
if bool(A2A_GRPC_TLS_CERT_FILE) != bool(A2A_GRPC_TLS_KEY_FILE):
    raise ImproperlyConfigured(
        "Set both A2A_GRPC_TLS_CERT_FILE and A2A_GRPC_TLS_KEY_FILE, or neither."
    )
A2A_GRPC_MAX_MESSAGE_BYTES = _positive_int("A2A_GRPC_MAX_MESSAGE_BYTES", A2A_MAX_REQUEST_BYTES)
A2A_GRPC_MAX_CONCURRENT_STREAMS = _positive_int("A2A_GRPC_MAX_CONCURRENT_STREAMS", 1000)
# How long SIGTERM waits for in-flight calls and streams before cancelling them.
A2A_GRPC_GRACE_SECONDS = _positive_float("A2A_GRPC_GRACE_SECONDS", 10.0)

# --- Drain on SIGTERM (a2a_platform.drain): the web processes and the gRPC sidecar ---
# For this long after SIGTERM a process keeps serving what is in flight (a blocking send whose
# task settles meanwhile gets it settled; streams go on) while it takes no new work. Then
# blocking sends are answered with their tasks as they are, streams end with a hint to resume
# elsewhere (SSE `retry:`, gRPC UNAVAILABLE), and the process exits. A web process takes up to
# 3 s more to answer and close; the sidecar ends its waits 1 s before A2A_GRPC_GRACE_SECONDS
# if that comes first. Keep it a few seconds under the supervisor's stop timeout (compose's
# stop_grace_period, 10 s by default).
A2A_DRAIN_SECONDS = _positive_float("A2A_DRAIN_SECONDS", 5.0)

# --- Prometheus metrics (a2a_platform/metrics.py) ---
# Set, scrapes send it as a bearer token. Unset, /metrics answers 403 (it names every tenant and
# agent) unless A2A_METRICS_OPEN is true: the embedded profile and the tests open it.
A2A_METRICS_OPEN = env.bool("A2A_METRICS_OPEN", default=False)
A2A_METRICS_TOKEN = ""
if env.str("A2A_METRICS_TOKEN", default="") or env.str("A2A_METRICS_TOKEN_FILE", default=""):
    A2A_METRICS_TOKEN = _secret("A2A_METRICS_TOKEN")
    if not all("\x21" <= c <= "\x7e" for c in A2A_METRICS_TOKEN):
        raise ImproperlyConfigured(
            "A2A_METRICS_TOKEN must be printable ASCII without spaces (it is sent in a header)."
        )
# The usage metrics (a2a_usage_*) labelled by tenant: one series per tenant with usage today.
# Off, they are platform totals (a handful of series, however many tenants there are).
A2A_METRICS_TENANT_LABEL = env.bool("A2A_METRICS_TENANT_LABEL", default=False)
# The gRPC sidecar's own metrics (its in-process instruments): host:port, or unset for none.
A2A_GRPC_METRICS_LISTEN = (
    _host_port("A2A_GRPC_METRICS_LISTEN", "") if env.str("A2A_GRPC_METRICS_LISTEN", "") else ""
)


# --- Push notifications: the SSRF guard (a2a_platform/ssrf.py) ---
# Push URLs must reach the public internet; these let an operator open chosen hosts (exact
# names, case-insensitive) or networks (CIDRs). Production leaves both empty; `make run` and
# the tests allowlist loopback. (Imports are local: this block is kept self-contained.)
def _push_allowed_hosts(name: str) -> list[str]:
    import ipaddress
    import re

    hosts: list[str] = []
    for raw in env.str(name, default="").split(","):
        host = raw.strip().lower()
        if not host:
            continue
        try:
            host = str(ipaddress.ip_address(host))
        except ValueError:
            # A host:port or a URL here would never match a host, so it is refused, not kept.
            if not re.fullmatch(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?", host):
                raise ImproperlyConfigured(
                    f"{name} must be comma-separated host names, got {raw.strip()!r}."
                ) from None
        hosts.append(host.rstrip("."))
    return hosts


def _push_allowed_networks(name: str) -> list[str]:
    import ipaddress

    networks: list[str] = []
    for raw in env.str(name, default="").split(","):
        if not raw.strip():
            continue
        try:
            # strict: 10.0.0.1/8 is more likely a typo than a wish for all of 10/8.
            networks.append(str(ipaddress.ip_network(raw.strip())))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name} must be comma-separated CIDRs (e.g. 127.0.0.0/8,::1/128), "
                f"got {raw.strip()!r}."
            ) from None
    return networks


A2A_PUSH_ALLOWED_HOSTS = _push_allowed_hosts("A2A_PUSH_ALLOWED_HOSTS")
A2A_PUSH_ALLOWED_NETWORKS = _push_allowed_networks("A2A_PUSH_ALLOWED_NETWORKS")
A2A_PUSH_TIMEOUT_SECONDS = _positive_float("A2A_PUSH_TIMEOUT_SECONDS", 10.0)

# --- Agents' outbound requests (the openai, a2a-proxy and webhook executors) ---
# The same guard as push, with its own exceptions: an operator may let agents reach an internal
# model server without letting push configs reach it. `make run` allowlists loopback (its demo
# proxy fronts an agent of the same platform). The timeout is each request's default; a kind's
# config may set its own.
A2A_AGENT_ALLOWED_HOSTS = _push_allowed_hosts("A2A_AGENT_ALLOWED_HOSTS")
A2A_AGENT_ALLOWED_NETWORKS = _push_allowed_networks("A2A_AGENT_ALLOWED_NETWORKS")
A2A_AGENT_TIMEOUT_SECONDS = _positive_float("A2A_AGENT_TIMEOUT_SECONDS", 60.0)

# --- OAuth 2.0 / OIDC bearer tokens (agents.identity, docs/identity.md) ---
# Issuers' discovery documents and key sets are fetched through the SSRF guard; an internal
# identity provider (Keycloak on a private network) is let through here, not by the push or
# agent exceptions.
A2A_IDENTITY_ALLOWED_HOSTS = _push_allowed_hosts("A2A_IDENTITY_ALLOWED_HOSTS")
A2A_IDENTITY_ALLOWED_NETWORKS = _push_allowed_networks("A2A_IDENTITY_ALLOWED_NETWORKS")
A2A_IDENTITY_TIMEOUT_SECONDS = _positive_float("A2A_IDENTITY_TIMEOUT_SECONDS", 5.0)
# How long a process uses an issuer's discovery document and key set before reading them again;
# a token signed with a key the set does not hold makes it read the set at once, at most once
# per A2A_JWKS_REFETCH_SECONDS per issuer (so made-up key ids cannot flood the provider).
A2A_JWKS_CACHE_SECONDS = _positive_float("A2A_JWKS_CACHE_SECONDS", 300.0)
A2A_JWKS_REFETCH_SECONDS = _positive_float("A2A_JWKS_REFETCH_SECONDS", 10.0)
# Clock skew allowed when checking a token's exp, nbf and iat.
A2A_TOKEN_LEEWAY_SECONDS = _positive_float("A2A_TOKEN_LEEWAY_SECONDS", 30.0)

# --- Push delivery: retries with exponential backoff and full jitter ---
# Defaults: 12 attempts, 30 s doubling up to 6 h between them, about 20 hours in all.
A2A_PUSH_MAX_ATTEMPTS = _positive_int("A2A_PUSH_MAX_ATTEMPTS", 12)
A2A_PUSH_BACKOFF_BASE_SECONDS = _positive_float("A2A_PUSH_BACKOFF_BASE_SECONDS", 30.0)
A2A_PUSH_BACKOFF_MAX_SECONDS = _positive_float("A2A_PUSH_BACKOFF_MAX_SECONDS", 6 * 3600.0)
# The task events a new push config hears (TaskEvent kinds): state changes and artifacts.
A2A_PUSH_EVENT_KINDS = env.list(
    "A2A_PUSH_EVENT_KINDS", default=["status_update", "artifact_update"]
)
_unknown_kinds = set(A2A_PUSH_EVENT_KINDS) - {"status_update", "artifact_update", "message", "task"}
if _unknown_kinds or not A2A_PUSH_EVENT_KINDS:
    raise ImproperlyConfigured(
        "A2A_PUSH_EVENT_KINDS must name some of status_update, artifact_update, message, task; "
        f"got {', '.join(A2A_PUSH_EVENT_KINDS) or 'nothing'}."
    )
# How often beat looks for due deliveries (and deliveries a dead worker left half-sent).
A2A_PUSH_DISPATCH_INTERVAL_SECONDS = _positive_float("A2A_PUSH_DISPATCH_INTERVAL_SECONDS", 15.0)

CELERY_BEAT_SCHEDULE = {
    "reap-stuck-tasks": {
        "task": "tasks_app.tasks.reap_stuck_tasks_task",
        "schedule": A2A_REAPER_INTERVAL_SECONDS,
    },
    "delete-expired-tasks": {
        "task": "tasks_app.tasks.delete_expired_tasks_task",
        "schedule": 3600.0,
    },
    # The audit log follows the tasks' retention, on the same schedule.
    "delete-expired-audit-events": {
        "task": "audit.tasks.delete_expired_audit_events_task",
        "schedule": 3600.0,
    },
    "dispatch-due-push-deliveries": {
        "task": "push_app.tasks.push_dispatch_due_task",
        "schedule": A2A_PUSH_DISPATCH_INTERVAL_SECONDS,
    },
}

# --- Logs (docs/configuration.md, "Logs") ---
# LOG_LEVEL governs every process: daphne, the gRPC sidecar, the Celery workers and beat (Celery
# leaves logging to this configuration: a2a_platform/celery.py). Below DEBUG, what repeats every
# few seconds is left out: beat's "Sending due task" lines, a worker's "Task ... received" (the
# job's outcome line follows), the outcome of the jobs beat sends (their failures are kept) and
# kombu's complaint that `filesystem://` names no host (a2a_platform/logs.py). `make run` leads
# each line with the name of the process that wrote it.
_log_level = env.str("LOG_LEVEL", default="INFO")
LOG_LEVEL = _log_level.strip().upper()
if LOG_LEVEL not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
    raise ImproperlyConfigured(
        f"LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {_log_level!r}."
    )
# daphne's access log: one line per request on standard output (manage.py runweb). `make run`
# turns it off unless LOG_LEVEL=DEBUG; Django logs a request that fails either way.
A2A_ACCESS_LOG = env.bool("A2A_ACCESS_LOG", default=True)
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "housekeeping": {
            "()": "a2a_platform.logs.Housekeeping",
            "periodic_tasks": sorted({entry["task"] for entry in CELERY_BEAT_SCHEDULE.values()}),
        }
    },
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": [] if LOG_LEVEL == "DEBUG" else ["housekeeping"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {}
    if LOG_LEVEL == "DEBUG"
    else {"celery.beat": {"level": "WARNING"}, "celery.worker.strategy": {"level": "WARNING"}},
}
