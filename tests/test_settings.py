"""Settings come from the environment and a malformed value stops start-up, naming itself; a
missing key, or keys that do not read the secrets already stored, stop every entry point with
one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography.fernet import Fernet

from agents.crypto import derived_key

from .conftest import _free_port, set_up_if_selected

ROOT = Path(__file__).resolve().parent.parent
R = TypeVar("R")


def at_once(*calls: Callable[[], R]) -> list[R]:
    """What each call returned, the calls made side by side: each starts a process of its own
    and waits for it, so independent starts share the CPUs instead of waiting their turn. (At
    most two a CPU at a time: a start is mostly Python importing, and one that shares its CPU
    with more would come near its timeout on a slow machine.)"""
    with ThreadPoolExecutor(max_workers=min(len(calls), 2 * (os.cpu_count() or 1))) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]


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


BAD_VALUES = [
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
    ("A2A_AGENT_HOST_PATTERN", "{agent}.agents.example.com"),
    ("A2A_AGENT_HOST_PATTERN", "{agent}--{tenant}"),
    ("A2A_AGENT_HOST_PATTERN", "https://{agent}.{tenant}.example.com/"),
    ("A2A_DEFAULT_AGENT", "conformance"),
    ("A2A_GRPC_AGENT_PORTS", "50152-50052"),
    ("A2A_GRPC_AGENT_PORTS", "50000-50100"),  # holds A2A_GRPC_LISTEN's port, 50051
]


@pytest.fixture(scope="module")
def started_with_bad_values() -> dict[tuple[str, str], subprocess.CompletedProcess[str]]:
    """Django started with each of BAD_VALUES, side by side: what each start printed."""
    results = at_once(*(partial(start, **{name: value}) for name, value in BAD_VALUES))
    return dict(zip(BAD_VALUES, results, strict=True))


@pytest.mark.parametrize("name, value", BAD_VALUES)
def test_bad_values_stop_start_up_and_name_the_setting(started_with_bad_values, name, value):
    result = started_with_bad_values[name, value]
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and name in result.stderr


def test_secret_file_and_public_host(tmp_path):
    secret = tmp_path / "key"
    secret.write_text("from-a-file\n")
    empty = tmp_path / "empty"
    empty.write_text("")
    result, failed = at_once(
        lambda: start(
            DJANGO_SECRET_KEY="",
            DJANGO_SECRET_KEY_FILE=str(secret),
            A2A_PUBLIC_BASE_URL="https://agents.example.com",
            DJANGO_ALLOWED_HOSTS="web",
        ),
        lambda: start(DJANGO_SECRET_KEY_FILE=str(empty)),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['agents.example.com', 'web']"
    assert failed.returncode != 0 and "is empty" in failed.stderr


def test_the_agents_host_pattern_allows_its_domain():
    result = start(
        A2A_PUBLIC_BASE_URL="https://a2a.example.com",
        A2A_AGENT_HOST_PATTERN="{agent}--{tenant}.Agents.example.com",
        DJANGO_ALLOWED_HOSTS="web",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['a2a.example.com', '.agents.example.com', 'web']"


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
    derived, chosen = at_once(
        lambda: start("A2A_PUBLIC_BASE_URL", A2A_VAR_DIR=str(tmp_path)),
        lambda: start(
            "A2A_PUBLIC_BASE_URL", A2A_VAR_DIR=str(tmp_path), A2A_PUBLIC_BASE_URL="http://h:1"
        ),
    )
    assert derived.stdout.strip() == "http://127.0.0.1:8765", derived.stderr
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
    from_file, unset, listen = at_once(
        lambda: start("A2A_METRICS_TOKEN", A2A_METRICS_TOKEN_FILE=str(secret)),
        lambda: start("A2A_METRICS_TOKEN"),
        lambda: start("A2A_GRPC_METRICS_LISTEN", A2A_GRPC_METRICS_LISTEN="[::1]:9100"),
    )
    assert from_file.stdout == "from-a-file\n"
    assert unset.stdout == "\n"
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


def _store(var: Path) -> Path:
    """`var` made an embedded profile's var dir whose database holds a secret (a tenant's
    signing key) encrypted under the key derived from STORED_UNDER."""
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


@pytest.fixture(scope="module")
def _storing(tmp_path_factory) -> Iterator[Future[Path]]:
    """_store, on a thread of its own."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(_store, tmp_path_factory.mktemp("stored"))


@pytest.fixture(scope="module", autouse=True)
def _store_beside_the_other_tests(request) -> None:
    """The three commands that store the secrets run one after another: when a test of this
    module that needs them is to run, they start with the module, beside the tests before it."""
    set_up_if_selected(request, "_storing")


@pytest.fixture(scope="module")
def stored(_storing) -> Path:
    """An embedded profile's var dir whose database holds a secret (a tenant's signing key)
    encrypted under the key derived from STORED_UNDER."""
    return _storing.result()


def test_the_key_that_stored_the_secrets_starts_the_commands(stored):
    result = command(["create_api_key", "acme", "ci"], stored, DJANGO_SECRET_KEY=STORED_UNDER)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("api key: ")


ENTRY_POINTS = {
    "create_tenant": ["create_tenant", "other"],
    "create_agent": ["create_agent", "acme", "bot", "--kind", "echo"],
    "create_api_key": ["create_api_key", "acme", "ci"],
    "seed_demo": ["seed_demo"],
    "runweb": ["runweb", "--port", "{port}"],
    "rungrpc": ["rungrpc"],
    "celeryworker": ["celeryworker", "agents"],
    "celery-beat": [
        "celery",
        "-A",
        "a2a_platform",
        "beat",
        "--schedule",
        "{var}/celerybeat-schedule",
    ],
}


@pytest.fixture(scope="module")
def started_with_another_key(stored) -> dict[str, tuple[subprocess.CompletedProcess[str], int]]:
    """Every entry point started on `stored` with another key than the one that stored the
    secrets, side by side (each is a process of its own): what each printed, and the port
    it was given to listen on."""

    def start_one(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], int]:
        port = _free_port()
        result = command(
            [a.format(port=port, var=stored) for a in argv],
            stored,
            DJANGO_SECRET_KEY="another-key",
            A2A_GRPC_LISTEN=f"127.0.0.1:{_free_port()}",
        )
        return result, port

    results = at_once(*(partial(start_one, argv) for argv in ENTRY_POINTS.values()))
    return dict(zip(ENTRY_POINTS, results, strict=True))


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_another_key_stops_every_entry_point_in_one_line(started_with_another_key, entry_point):
    # given secrets stored under one key, when a process starts with another
    result, port = started_with_another_key[entry_point]
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
    alone, both = at_once(
        lambda: command(["create_api_key", "acme", "ci"], stored, A2A_ENCRYPTION_KEYS=new),
        lambda: command(
            ["create_api_key", "acme", "ci"],
            stored,
            A2A_ENCRYPTION_KEYS=f"{new},{derived_key(STORED_UNDER)}",
        ),
    )
    assert alone.returncode == 1
    assert alone.stderr.startswith("ImproperlyConfigured: No key of A2A_ENCRYPTION_KEYS")
    assert "A2A_ENCRYPTION_KEYS=new,old" in alone.stderr
    assert both.returncode == 0, both.stderr


def test_behind_a_tls_proxy_forwarded_https_is_trusted_only_when_asked_and_cookies_are_secure():
    https = {"A2A_PUBLIC_BASE_URL": "https://a2a.example.com"}
    # print(settings.A, settings.B, settings.C)
    printing = (
        "SECURE_PROXY_SSL_HEADER, settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE"
    )
    plain, proxied, untrusted = at_once(
        lambda: start(printing, A2A_PUBLIC_BASE_URL="http://127.0.0.1:8000"),
        lambda: start(printing, A2A_TRUST_X_FORWARDED_PROTO="true", **https),
        lambda: start(printing, **https),
    )
    assert plain.stdout.strip() == "None False False", plain.stderr
    assert proxied.stdout.strip() == "('HTTP_X_FORWARDED_PROTO', 'https') True True", proxied.stderr
    assert untrusted.stdout.strip() == "None True True", untrusted.stderr
