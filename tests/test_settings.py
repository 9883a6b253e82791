"""Settings come from the environment and a malformed value stops start-up, naming itself; a
missing key, or keys that do not read the secrets already stored, stop every entry point with
one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from agents.crypto import derived_key

from .conftest import _free_port

ROOT = Path(__file__).resolve().parent.parent


def start(printing: str = "ALLOWED_HOSTS", **env: str | None) -> subprocess.CompletedProcess[str]:
    """Start Django in a new process with `env` (and no other A2A_/DJANGO_ variables; None
    leaves a variable out) and print one setting."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "DJANGO_"))}
    environment.update(
        {"DJANGO_SETTINGS_MODULE": "a2a_platform.settings", "DJANGO_SECRET_KEY": "x"}
    )
    environment.update({"A2A_VAR_DIR": "/tmp/a2a-settings-test"})
    for name, value in env.items():
        if value is None:
            environment.pop(name, None)
        else:
            environment[name] = value
    code = "import django; django.setup(); from django.conf import settings; "
    code += f"print(settings.{printing})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "name, value",
    [
        ("A2A_TASK_LEASE_SECONDS", "2m"),
        ("A2A_TASK_LEASE_SECONDS", "1e999"),
        ("A2A_BLOCKING_TIMEOUT_SECONDS", "-1"),
        ("A2A_POLL_INTERVAL_SECONDS", "0"),
        ("A2A_MAX_REQUEST_BYTES", "0"),
        ("A2A_MAX_BATCH_REQUESTS", "lots"),
        ("A2A_PUBLIC_BASE_URL", "agents.example.com"),
        ("DJANGO_SECRET_KEY", ""),
        ("A2A_TASK_LEASE_SECONDS", "0.1"),
        ("A2A_PUSH_EVENT_KINDS", "status_update,bogus"),
        ("A2A_AUTH_CACHE_SECONDS", "-1"),
        ("A2A_AUTH_CACHE_SECONDS", "1s"),
        ("LOG_LEVEL", "LOUD"),
    ],
)
def test_bad_values_stop_start_up_and_name_the_setting(name, value):
    result = start(**{name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr


def test_secret_file_and_public_host(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    result = start(
        DJANGO_SECRET_KEY="",
        DJANGO_SECRET_KEY_FILE=str(secret),
        A2A_PUBLIC_BASE_URL="https://agents.example.com",
        DJANGO_ALLOWED_HOSTS="web",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['agents.example.com', 'web']"
    empty = tmp_path / "empty"
    empty.write_text("")
    failed = start(DJANGO_SECRET_KEY_FILE=str(empty))
    assert failed.returncode != 0 and "is empty" in failed.stderr


def test_without_a_key_the_embedded_profile_makes_one_in_the_var_dir_and_keeps_it(tmp_path):
    var = tmp_path / "var"
    first = start("SECRET_KEY", DJANGO_SECRET_KEY=None, DATABASE_URL=None, A2A_VAR_DIR=str(var))
    assert first.returncode == 0, first.stderr
    key_file = var / "secret_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert first.stdout.strip() == key_file.read_text().strip() != ""
    again = start("SECRET_KEY", DJANGO_SECRET_KEY=None, DATABASE_URL=None, A2A_VAR_DIR=str(var))
    assert again.stdout == first.stdout  # every later process and command reads the same key


def test_without_a_key_the_production_profile_stops_and_says_so(tmp_path):
    failed = start(
        DJANGO_SECRET_KEY=None,
        DATABASE_URL="postgres://u@127.0.0.1:1/db",
        A2A_VAR_DIR=str(tmp_path),
    )
    assert failed.returncode != 0 and "Set DJANGO_SECRET_KEY" in failed.stderr
    assert not (tmp_path / "secret_key").exists()


def test_what_make_run_derived_is_read_from_the_var_dir_and_the_environment_wins(tmp_path):
    (tmp_path / "run.env").write_text("A2A_PUBLIC_BASE_URL=http://127.0.0.1:8765\n")
    derived = start("A2A_PUBLIC_BASE_URL", A2A_VAR_DIR=str(tmp_path))
    assert derived.stdout.strip() == "http://127.0.0.1:8765", derived.stderr
    chosen = start(
        "A2A_PUBLIC_BASE_URL", A2A_VAR_DIR=str(tmp_path), A2A_PUBLIC_BASE_URL="http://h:1"
    )
    assert chosen.stdout.strip() == "http://h:1", chosen.stderr


@pytest.mark.parametrize(
    "name, raw",
    [
        ("A2A_METRICS_TOKEN", "has a space"),
        ("A2A_METRICS_TOKEN", "caf\u00e9"),
        ("A2A_GRPC_METRICS_LISTEN", "http://0.0.0.0:9100"),
        ("A2A_GRPC_METRICS_LISTEN", "9100"),
    ],
)
def test_bad_metrics_settings_stop_start_up(name, raw):
    result = start(name, **{name: raw})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr


def test_metrics_settings_from_the_environment_and_a_file(tmp_path):
    secret = tmp_path / "token"
    secret.write_text("from-a-file\n")
    assert start("A2A_METRICS_TOKEN", A2A_METRICS_TOKEN_FILE=str(secret)).stdout == "from-a-file\n"
    assert start("A2A_METRICS_TOKEN").stdout == "\n"  # unset
    listen = start("A2A_GRPC_METRICS_LISTEN", A2A_GRPC_METRICS_LISTEN="[::1]:9100")
    assert listen.stdout == "[::1]:9100\n"


def command(
    argv: list[str], var: Path, timeout: float = 90, **env: str
) -> subprocess.CompletedProcess[str]:
    """`argv` (a manage.py command or the celery program) as a user runs it on the embedded
    profile with var dir `var`: none of the suite's database, broker, key or A2A_ settings."""
    suite = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("A2A_", "DJANGO_")) and k not in suite
    }
    environment.update(A2A_VAR_DIR=str(var), PYTHONPATH=str(ROOT), **env)
    program = [sys.executable, "manage.py"] if argv[0] != "celery" else [sys.executable, "-m"]
    return subprocess.run(
        [*program, *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    "argv",
    [["create_tenant", "x"], ["runweb"], ["celery", "-A", "a2a_platform", "beat"]],
    ids=["create_tenant", "runweb", "celery-beat"],
)
def test_without_a_key_the_production_profile_says_so_in_one_line(tmp_path, argv):
    result = command(argv, tmp_path, DATABASE_URL="postgres://u@127.0.0.1:1/db")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "ImproperlyConfigured: Set DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE): with "
        "DATABASE_URL set (the production profile) the platform makes no key of its own."
    ]


STORED_UNDER = "the-key-that-stored-the-secrets"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """An embedded profile's var dir whose database holds a secret (a tenant's signing key)
    encrypted under the key derived from STORED_UNDER."""
    var = tmp_path_factory.mktemp("stored")
    for argv in (
        ["migrate", "--noinput"],
        ["create_tenant", "acme"],
        [
            "shell",
            "-c",
            "from agents.models import Tenant; from agents.services import signing_key_active; "
            "signing_key_active(tenant=Tenant.objects.get(slug='acme'))",
        ],
    ):
        done = command(argv, var, DJANGO_SECRET_KEY=STORED_UNDER)
        assert done.returncode == 0, done.stderr
    return var


def test_the_key_that_stored_the_secrets_starts_the_commands(stored):
    result = command(["create_api_key", "acme", "ci"], stored, DJANGO_SECRET_KEY=STORED_UNDER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("api key: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["create_tenant", "other"],
        ["create_agent", "acme", "bot", "--kind", "echo"],
        ["create_api_key", "acme", "ci"],
        ["seed_demo"],
        ["runweb", "--port", "{port}"],
        ["rungrpc"],
        ["celeryworker", "agents"],
        ["celery", "-A", "a2a_platform", "beat", "--schedule", "{var}/celerybeat-schedule"],
    ],
    ids=lambda argv: argv[0] if argv[0] != "celery" else "celery-beat",
)
def test_another_key_stops_every_entry_point_in_one_line(stored, argv):
    # given secrets stored under one key, when a process starts with another
    port = _free_port()
    argv = [a.format(port=port, var=stored) for a in argv]
    result = command(
        argv,
        stored,
        DJANGO_SECRET_KEY="another-key",
        A2A_GRPC_LISTEN=f"127.0.0.1:{_free_port()}",
    )
    # then it stops before doing anything, saying which setting and what to do, in one line
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ImproperlyConfigured: The encryption key derived from ")
    assert "DJANGO_SECRET_KEY that stored them" in lines[0]
    assert "agents.SigningKey" in lines[0]
    assert "api key:" not in result.stdout and "card:" not in result.stdout
    with socket.socket() as probe:  # nothing listens
        assert probe.connect_ex(("127.0.0.1", port)) != 0


def test_rotating_to_new_keys_needs_the_old_one_listed_after_them(stored):
    new = Fernet.generate_key().decode()
    alone = command(["create_api_key", "acme", "ci"], stored, A2A_ENCRYPTION_KEYS=new)
    assert alone.returncode == 1
    assert alone.stderr.startswith("ImproperlyConfigured: No key of A2A_ENCRYPTION_KEYS")
    assert "A2A_ENCRYPTION_KEYS=new,old" in alone.stderr
    both = command(
        ["create_api_key", "acme", "ci"],
        stored,
        A2A_ENCRYPTION_KEYS=f"{new},{derived_key(STORED_UNDER)}",
    )
    assert both.returncode == 0, both.stderr


def test_behind_a_tls_proxy_forwarded_https_is_trusted_only_when_asked_and_cookies_are_secure():
    https = {"A2A_PUBLIC_BASE_URL": "https://a2a.example.com"}
    # print(settings.A, settings.B, settings.C)
    printing = (
        "SECURE_PROXY_SSL_HEADER, settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE"
    )
    plain = start(printing, A2A_PUBLIC_BASE_URL="http://127.0.0.1:8000")
    assert plain.stdout.strip() == "None False False", plain.stderr
    proxied = start(printing, A2A_TRUST_X_FORWARDED_PROTO="true", **https)
    assert proxied.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https') True True", proxied.stderr
    untrusted = start(printing, **https)
    assert untrusted.stdout.strip() == "None True True", untrusted.stderr
