"""Settings come from the environment and a malformed value stops start-up, naming itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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
