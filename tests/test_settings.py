"""Settings come from the environment and a malformed value stops start-up, naming itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start(printing: str = "ALLOWED_HOSTS", **env: str) -> subprocess.CompletedProcess[str]:
    """Start Django in a new process with `env` (and no other A2A_/DJANGO_ variables) and
    print one setting."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("A2A_", "DJANGO_"))}
    environment.update(
        {"DJANGO_SETTINGS_MODULE": "a2a_platform.settings", "DJANGO_SECRET_KEY": "x"}
    )
    environment.update({"A2A_VAR_DIR": "/tmp/a2a-settings-test", **env})
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
