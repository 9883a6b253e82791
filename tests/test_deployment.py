"""The deployment files, read and checked (there is no Docker engine here): docker-compose.yml
runs the processes the test suite runs natively, with settings the platform actually reads and
healthchecks the code answers; the Dockerfile, .dockerignore and constraints.txt build the image
from pinned versions. Beat's liveness record and `manage.py healthcheck` run for real, against
the test database, real beat processes and the live platform's Celery workers."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.metadata
import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml
from django.conf import settings
from django.core.management import call_command, get_commands, load_command_class
from django.db import connection
from django.utils import timezone
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .conftest import VENV_BIN, _free_port, require, stop_process
from .e2e.helpers import poll

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_SOURCE = (ROOT / "a2a_platform" / "settings.py").read_text()


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_compose_runs_the_production_profile():
    services = compose()["services"]
    assert {"postgres", "redis", "migrate", "web", "worker", "beat", "grpc"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["web"]["command"][:3] == ["python", "manage.py", "runweb"]
    assert services["web"]["command"][3:] == ["--bind", "0.0.0.0", "--port", "8000"]
    assert services["worker"]["command"][:4] == ["python", "manage.py", "celeryworker", "agents"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "a2a_platform", "beat"]
    assert services["migrate"]["command"] == ["python", "manage.py", "migrate", "--noinput"]
    assert services["grpc"]["command"] == ["python", "manage.py", "rungrpc"]
    for name in ("web", "worker", "beat", "grpc"):
        assert services[name]["depends_on"]["migrate"]["condition"] == (
            "service_completed_successfully"
        )


def test_every_queue_has_its_own_workers_in_compose_and_make_run():
    """Agent runs, push deliveries and maintenance each have consumers of their own, started
    by the one command that knows each queue's pool (manage.py celeryworker)."""
    from a2a_platform.celery import app
    from tasks_app.management.commands.celeryworker import worker_argv

    queues = {q.name for q in app.conf.task_queues}
    assert queues == {"agents", "push", "maintenance"}
    consumed = {}
    for name, service in compose()["services"].items():
        command = service.get("command", [])
        if command[:3] == ["python", "manage.py", "celeryworker"]:
            consumed[command[3]] = name
    assert set(consumed) == queues, consumed
    run_sh = (ROOT / "scripts" / "run.sh").read_text()
    for queue in queues:
        assert f"manage.py celeryworker {queue} " in run_sh
    for task, queue in {
        "tasks_app.tasks.run_agent_task": "agents",
        "push_app.tasks.push_deliver_task": "push",
        "tasks_app.tasks.reap_stuck_tasks_task": "maintenance",
        "push_app.tasks.push_dispatch_due_task": "maintenance",
    }.items():
        assert app.amqp.router.route({}, task)["queue"].name == queue
    agents = worker_argv("agents")
    assert agents[agents.index("--pool") + 1] == "threads"
    assert agents[agents.index("--concurrency") + 1] == str(settings.A2A_WORKER_MAX_RUNS)
    assert settings.A2A_WORKER_MAX_RUNS >= 100 and settings.CELERY_WORKER_PREFETCH_MULTIPLIER == 1


def test_compose_gives_a_stopping_worker_its_grace_period():
    grace = compose()["services"]["worker"]["stop_grace_period"]
    assert int(grace.removesuffix("s")) > settings.A2A_WORKER_GRACE_SECONDS


def test_compose_entry_points_exist():
    module, attribute = "a2a_platform.asgi:application".split(":")
    assert hasattr(importlib.import_module(module), attribute)
    assert importlib.import_module("a2a_platform.celery").app.main == "a2a_platform"
    assert "migrate" in get_commands()
    assert get_commands()["rungrpc"] == "grpc_server"
    assert get_commands()["celeryworker"] == "tasks_app"


def test_compose_settings_are_ones_the_platform_reads_and_secrets_are_not_inline():
    for name in ("web", "worker", "push-worker", "maintenance-worker", "beat", "migrate", "grpc"):
        environment = compose()["services"][name]["environment"]
        for key, value in environment.items():
            assert re.search(rf'"{key}"', SETTINGS_SOURCE), f"{key} is not read by settings.py"
            if key in ("DJANGO_SECRET_KEY",):
                assert value.startswith("${"), f"{key} must come from the environment"
        assert environment["DATABASE_URL"].startswith("postgres://")
        assert environment["REDIS_URL"].startswith("redis://")


def _project_packages() -> list[str]:
    """The project's own packages: pyproject.toml's list, which pip installs (the image too)."""
    from .test_image import project_packages

    return project_packages()


def test_pyproject_lists_every_package_the_code_imports():
    """The list pip installs from holds every package of the checkout that the project's code
    imports (bindings is no Django app: INSTALLED_APPS alone did not name it), every app, and
    the packages whose imports lint-imports checks."""
    packages = set(_project_packages())
    local = {p.name for p in ROOT.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    imported: dict[str, str] = {}
    for package in packages:
        for source in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(source.read_text())):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                else:
                    continue
                for name in names:
                    imported.setdefault(name.split(".")[0], str(source.relative_to(ROOT)))
    missing = {name: where for name, where in imported.items() if name in local - packages}
    assert not missing, f"imported but not in pyproject.toml's package list: {missing}"
    apps = {app.split(".")[0] for app in settings.INSTALLED_APPS}
    assert {app for app in apps if (ROOT / app).is_dir()} <= packages
    linted = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert set(linted["root_packages"]) == packages


def test_the_image_gets_every_package_pyproject_lists_whole():
    """What the Dockerfile's COPY instructions take from the build context (.dockerignore
    applied) holds every file of every package pip installs."""
    from .test_image import copied_files

    copied = {path for path in copied_files(ROOT).values()}
    for package in _project_packages():
        files = {
            path.relative_to(ROOT).as_posix()
            for path in (ROOT / package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        }
        assert files and files <= copied, f"{package}: {sorted(files - copied)[:5]} left out"


def test_every_package_and_its_templates_and_static_files_are_installed():
    """The image runs from site-packages (pip install .), so anything not declared is missing."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    included = setuptools["packages"]["find"]["include"]
    data = setuptools.get("package-data", {})
    for package in _project_packages():
        assert f"{package}*" in included
        for folder in ("templates", "static"):
            if (ROOT / package / folder).is_dir():
                assert any(p.startswith(f"{folder}/") for p in data.get(package, [])), package


def _default(value: str) -> str:
    """The value compose uses when the variable is unset: `${NAME:-default}` -> `default`."""
    found = re.fullmatch(r"\$\{\w+:-([^}]*)\}", value)
    return found.group(1) if found else value


def test_compose_grpc_sidecar_listens_where_the_cards_say():
    services = compose()["services"]
    grpc_env = services["grpc"]["environment"]
    listen_host, _, listen_port = grpc_env["A2A_GRPC_LISTEN"].rpartition(":")
    assert listen_host == "0.0.0.0", "inside its container the sidecar must listen on every address"
    published = {p.rpartition(":")[2]: p.split(":")[-2] for p in services["grpc"]["ports"]}
    assert listen_port in published, "the sidecar's port is not published"
    # web renders the cards; the sidecar answers GetExtendedAgentCard: both advertise one address.
    for name in ("web", "grpc"):
        public = services[name]["environment"]["A2A_GRPC_PUBLIC_ADDRESS"]
        host, _, port = _default(public).rpartition(":")
        assert host and port == published[listen_port], (
            f"{name}: {public} is not the published port"
        )
    # Like web, the sidecar has a healthcheck: a gRPC health Check on its own port.
    assert "healthcheck" in services["web"]
    health = " ".join(services["grpc"]["healthcheck"]["test"])
    assert "grpc_health" in health and f"127.0.0.1:{listen_port}" in health


# --- the compose file against the code ---------------------------------------------------------

# Compose's own defaults for a trial on the machine that runs it, where the settings' defaults
# suit `make run` (the compose file says so beside them).
COMPOSE_OWN_DEFAULTS = {"A2A_PUBLIC_BASE_URL", "DJANGO_ALLOWED_HOSTS", "A2A_GRPC_PUBLIC_ADDRESS"}
# What production cannot start without: the settings raise, or (the encryption keys) would
# derive a key from DJANGO_SECRET_KEY that changing it makes useless.
PRODUCTION_REQUIRED = {"DJANGO_SECRET_KEY", "A2A_ENCRYPTION_KEYS", "POSTGRES_PASSWORD"}
INTERPOLATION = re.compile(r"\$\{(\w+)(:[?-])([^}]*)\}")


def platform_services() -> dict[str, dict]:
    """The services that run the platform's image (not postgres and redis)."""
    return {
        name: s for name, s in compose()["services"].items() if s.get("image") == "a2a-platform"
    }


def _required_samples() -> dict[str, str]:
    from cryptography.fernet import Fernet

    return {
        "POSTGRES_PASSWORD": "sample-password",
        "DJANGO_SECRET_KEY": "sample-secret-key-" + "x" * 40,
        "A2A_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    }


def resolved_environment(service: dict, samples: dict[str, str]) -> dict[str, str]:
    """The service's environment as compose makes it when only the required variables are set:
    `${X:-d}` is d, `${X:?m}` the sample, and a variable without a value is not passed."""

    def substitute(found: re.Match[str]) -> str:
        name, operator, argument = found.groups()
        return samples[name] if operator == ":?" else argument

    environment = {}
    for key, value in service["environment"].items():
        if value is None:
            continue
        environment[key] = INTERPOLATION.sub(substitute, str(value))
        assert "$" not in environment[key], f"{key}: {value} is not interpolated as expected"
    return environment


_LOAD_SETTINGS = """
import importlib, json, os, sys

def load(environment):
    os.environ.clear()
    os.environ.update(environment)
    sys.modules.pop("a2a_platform.settings", None)
    module = importlib.import_module("a2a_platform.settings")
    return {name: repr(value) for name, value in vars(module).items() if name.isupper()}

print(json.dumps([load(environment) for environment in json.load(sys.stdin)]))
"""


def load_settings(environments: list[dict[str, str]]) -> list[dict[str, str]]:
    """a2a_platform.settings as each environment (and nothing else) makes it, in a fresh
    interpreter: {setting: repr(value)} per environment."""
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SETTINGS],
        input=json.dumps(environments),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": os.environ["PATH"]},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_compose_passes_every_secret_the_settings_read_and_requires_the_production_ones():
    secrets = set(re.findall(r'_secret\(\s*"(\w+)"', SETTINGS_SOURCE))
    assert {"DJANGO_SECRET_KEY", "DATABASE_URL", "A2A_ENCRYPTION_KEYS"} <= secrets
    for name, service in platform_services().items():
        environment = service["environment"]
        assert secrets <= set(environment), f"{name} lacks {secrets - set(environment)}"
        required = {
            var
            for value in environment.values()
            for var, operator, _ in INTERPOLATION.findall(str(value or ""))
            if operator == ":?"
        }
        assert required == PRODUCTION_REQUIRED, name
    postgres = compose()["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert postgres.startswith("${POSTGRES_PASSWORD:?")
    # The message says how to make a key the settings accept.
    keys = platform_services()["web"]["environment"]["A2A_ENCRYPTION_KEYS"]
    assert "Fernet.generate_key().decode()" in keys


def test_compose_environment_of_every_service_loads_the_settings(tmp_path):
    """Each service's environment, with only the required variables set, is one the settings
    accept (no ImproperlyConfigured) and gives the production profile."""
    samples = _required_samples()
    services = platform_services()
    environments = [
        {"A2A_VAR_DIR": str(tmp_path), **resolved_environment(service, samples)}
        for service in services.values()
    ]
    loaded_by_service = dict(zip(services, load_settings(environments), strict=True))
    for name, loaded in loaded_by_service.items():
        assert "'HOST': 'postgres'" in loaded["DATABASES"], name
        assert "'PASSWORD': 'sample-password'" in loaded["DATABASES"], name
        assert loaded["SECRET_KEY"] == repr(samples["DJANGO_SECRET_KEY"]), name
        assert loaded["A2A_ENCRYPTION_KEYS"] == repr([samples["A2A_ENCRYPTION_KEYS"]]), name
        assert loaded["CELERY_BROKER_URL"].startswith("'redis://redis:"), name
        assert loaded["REDIS_URL"].startswith("'redis://redis:"), name
        assert loaded["DEBUG"] == "False", name
    assert loaded_by_service["grpc"]["A2A_GRPC_LISTEN"] == "'0.0.0.0:50051'"


def test_compose_defaults_are_the_settings_defaults(tmp_path):
    """An optional variable's default in compose (`${X:-default}`) changes nothing: the settings
    are the same as with the variable unset. Compose's own trial defaults are the exception."""
    samples = _required_samples()
    service = platform_services()["web"]
    environment = {"A2A_VAR_DIR": str(tmp_path), **resolved_environment(service, samples)}
    optional = [
        key
        for key, value in service["environment"].items()
        if re.fullmatch(r"\$\{(\w+):-[^}]*\}", str(value or "")) and key not in COMPOSE_OWN_DEFAULTS
    ]
    assert "A2A_METRICS_TOKEN" in optional
    cases = [environment] + [{k: v for k, v in environment.items() if k != key} for key in optional]
    with_defaults, *without = load_settings(cases)
    for key, loaded in zip(optional, without, strict=True):
        changed = {name for name in loaded if loaded[name] != with_defaults[name]}
        assert not changed, f"compose's default for {key} changes {changed}"


def _documented_compose_settings() -> dict[str, set[str]]:
    """docs/production.md's list of what compose passes: {the bullet's label: its names}."""
    guide = (ROOT / "docs" / "production.md").read_text()
    section = guide.split("### Where they go with docker compose", 1)[1].split("\n###", 1)[0]
    bullets = re.findall(r"^- (.*?)(?=^- |^\s*$)", section, re.M | re.S)
    return {
        bullet.split(":", 1)[0].split(" (")[0].strip(): set(
            re.findall(r"`([A-Z][A-Z0-9_]*)`", bullet.split(":", 1)[1])
        )
        for bullet in bullets
    }


def test_the_production_guide_lists_every_setting_compose_passes():
    documented = _documented_compose_settings()
    environments = [service["environment"] for service in platform_services().values()]
    keys = {key for environment in environments for key in environment}
    values = {key: str(value) for environment in environments for key, value in environment.items()}
    only_when_set = {key for e in environments for key, value in e.items() if value is None}
    own_defaults = {key for key, v in values.items() if re.fullmatch(r"\$\{\w+:-[^}]*\}", v)}
    required = {
        var for v in values.values() for var, op, _ in INTERPOLATION.findall(v) if op == ":?"
    }
    assert documented["passed on only when set"] == only_when_set
    assert (
        documented["with compose's own defaults, for a trial on the same machine"] == own_defaults
    )
    assert documented["required"] == required
    fixed = keys - only_when_set - own_defaults - required
    assert documented["fixed"] - required == fixed
    postgres = " ".join(compose()["services"]["postgres"]["command"])
    assert documented["for the `postgres` service"] == set(re.findall(r"\$\{(\w+)", postgres))


# PostgreSQL's reserve for superusers (superuser_reserved_connections: 3 unless set, and the
# compose file does not set it), and how many one-off processes at once (migrate, beat's
# healthcheck, `docker compose run`) the compose file keeps room for.
SUPERUSER_RESERVED_CONNECTIONS = 3
ONE_OFF_PROCESSES = 10


def one_thread_pool(pool_min: int, pool_max: int) -> int:
    """The connections of a process that uses the database from one thread at a time."""
    return min(pool_max, pool_min + 1)


def compose_connections(pool_min: int, pool_max: int) -> tuple[int, int]:
    """How many connections compose's long-running services can open, as (per web process,
    all the rest): each process's pool caps it at pool_max. runweb itself and beat use the
    database from one thread at a time (beat: its start, then one tick record at a time):
    their pools hold the minimum and the one more that psycopg_pool opens for a first request
    that finds none ready yet (3 each, as counted on a running platform)."""
    per_web_process = rest = 0
    for name, service in platform_services().items():
        command = service["command"]
        if name == "migrate":
            assert command[2] == "migrate"  # a one-off: it ends before the others start
        elif command[:3] == ["python", "manage.py", "runweb"]:
            per_web_process += pool_max
            rest += one_thread_pool(pool_min, pool_max)
        elif command[:3] in (
            ["python", "manage.py", "rungrpc"],
            ["python", "manage.py", "celeryworker"],
        ):
            rest += pool_max
        elif command[:4] == ["celery", "-A", "a2a_platform", "beat"]:
            rest += one_thread_pool(pool_min, pool_max)
        else:
            raise AssertionError(f"{name}: how many connections does {command} open?")
    return per_web_process, rest


def test_compose_postgres_has_room_for_every_connection_the_platform_opens(tmp_path):
    setting = next(
        word for word in compose()["services"]["postgres"]["command"] if "max_connections=" in word
    )
    max_connections = int(_default(setting.partition("=")[2]))
    environment = resolved_environment(platform_services()["web"], _required_samples())
    (loaded,) = load_settings([{"A2A_VAR_DIR": str(tmp_path), **environment}])
    pool = ast.literal_eval(loaded["DATABASES"])["default"]["OPTIONS"]["pool"]
    per_web_process, rest = compose_connections(pool["min_size"], pool["max_size"])
    one_offs = ONE_OFF_PROCESSES * one_thread_pool(pool["min_size"], pool["max_size"])
    room = max_connections - SUPERUSER_RESERVED_CONNECTIONS - one_offs
    fits = (room - rest) // per_web_process

    def at_most(web_processes: int) -> int:
        return per_web_process * web_processes + rest

    # Hosts of up to 16 cores (a web process each) run compose as it is.
    assert fits >= 16, f"{max_connections} connections fit only {fits} web processes"
    assert at_most(fits) <= room < at_most(fits + 1)
    # The numbers as the compose file's comment and section 4 of the guide write them.
    guide = " ".join((ROOT / "docs" / "production.md").read_text().split())
    for text in (" ".join(compose_text().replace("#", "").split()), guide):
        assert f"up to {fits} web processes" in text
        assert f"{at_most(2)} on 2 cores" in text
        assert f"{max_connections}" in text and f"{one_offs} for one-off" in text
    assert f"{at_most(8)} on 8, {at_most(16)} on 16" in guide


def test_every_long_running_service_has_a_healthcheck_the_code_answers():
    from celery.utils.nodenames import host_format

    from tasks_app.management.commands.healthcheck import WORKER_NODENAME, worker_nodename

    services = compose()["services"]
    # migrate is a one-shot job: the others wait for it to exit 0, there is nothing to ask.
    assert "healthcheck" not in services["migrate"] and services["migrate"]["restart"] == "no"
    parser = load_command_class("tasks_app", "healthcheck").create_parser(
        "manage.py", "healthcheck"
    )
    checked = set()
    for name, service in services.items():
        if name == "migrate":
            continue
        test = service["healthcheck"]["test"]
        assert test[0] in ("CMD", "CMD-SHELL"), name
        if test[1:3] == ["python", "manage.py"]:
            assert test[3] in get_commands(), f"{name}: no command {test[3]}"
        if test[1:4] != ["python", "manage.py", "healthcheck"]:
            continue
        options = parser.parse_args(test[4:])  # a wrong argument raises CommandError
        command = service["command"]
        if options.process == "worker":
            # The worker's node name is the one the healthcheck pings.
            assert command[:4] == ["python", "manage.py", "celeryworker", options.queue], name
            nodename = command[command.index("-n") + 1]
            assert nodename == WORKER_NODENAME.format(queue=options.queue), name
            assert host_format(nodename) == worker_nodename(options.queue)
        else:
            assert command[:4] == ["celery", "-A", "a2a_platform", "beat"], name
        checked.add(name)
    assert checked == {"worker", "push-worker", "maintenance-worker", "beat"}


def _option(command: list[str], *names: str) -> str:
    for name in names:
        if name in command:
            return command[command.index(name) + 1]
    raise AssertionError(f"{command} has none of {names}")


def test_beat_runs_the_recording_scheduler_with_its_schedule_on_a_volume():
    from celery.beat import PersistentScheduler
    from kombu.utils.imports import symbol_by_name

    from a2a_platform.beat import Scheduler

    beat = compose()["services"]["beat"]
    scheduler = symbol_by_name(_option(beat["command"], "--scheduler", "-S"))
    assert scheduler is Scheduler and issubclass(scheduler, PersistentScheduler)
    # The schedule file is in the image's var dir (owned by its user), on a volume of its own.
    var_dir = re.search(r"A2A_VAR_DIR=(\S+)", (ROOT / "Dockerfile").read_text()).group(1)
    assert Path(_option(beat["command"], "--schedule", "-s")).parent == Path(var_dir)
    assert any(v.split(":")[1] == var_dir for v in beat["volumes"])
    assert beat["volumes"][0].split(":")[0] in compose()["volumes"]
    run_sh = (ROOT / "scripts" / "run.sh").read_text()
    beat_line = next(line for line in run_sh.splitlines() if " beat " in line)
    assert "--scheduler a2a_platform.beat:Scheduler" in beat_line


def _documented_commands() -> list[tuple[str, dict[str, str | None], list[str]]]:
    """The `docker compose run` commands the compose file's opening comment gives, as
    (service, the -e variables, manage.py's arguments)."""
    commands = []
    for line in compose_text().splitlines():
        if not line.startswith("#") or "docker compose run" not in line:
            continue
        words = shlex.split(line.lstrip("# "))
        words = words[words.index("run") + 1 :]
        environment: dict[str, str | None] = {}
        while words[0].startswith("-"):
            option = words.pop(0)
            if option == "-e":
                key, _, value = words.pop(0).partition("=")
                environment[key] = value or None  # without a value: taken from the shell
        service, program, script, *arguments = words
        assert [program, script] == ["python", "manage.py"], line
        commands.append((service, environment, arguments))
    return commands


def compose_text() -> str:
    return (ROOT / "docker-compose.yml").read_text()


@pytest.mark.django_db
def test_the_first_start_commands_in_compose_work(monkeypatch):
    """The first login and the first tenant, as the compose file documents them, run here
    against the database: the commands exist, take those arguments and do their work."""
    from django.contrib.auth import get_user_model

    from agents.models import Agent, ApiKey, Tenant

    commands = _documented_commands()
    names = [arguments[0] for _, _, arguments in commands]
    assert names.count("createsuperuser") == 2
    assert {"create_tenant", "create_agent", "create_api_key"} <= set(names)
    for service, environment, arguments in commands:
        assert service in platform_services()
        assert arguments[0] in get_commands(), arguments
        if arguments == ["createsuperuser"]:  # the interactive one needs a terminal
            load_command_class(get_commands()["createsuperuser"], "createsuperuser").create_parser(
                "manage.py", "createsuperuser"
            ).parse_args([])
            continue
        for key, value in environment.items():
            monkeypatch.setenv(key, value if value is not None else "a first password, long")
        out = io.StringIO()
        call_command(*arguments, stdout=out)
        if arguments[0] == "create_api_key":
            assert out.getvalue().startswith("api key: ")
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff and admin.email == "admin@example.com"
    assert admin.check_password("a first password, long")
    tenant = Tenant.objects.get(slug="acme")
    assert Agent.objects.filter(tenant=tenant, slug="helper").exists()
    assert ApiKey.objects.filter(tenant=tenant, name="ci-bot").exists()


# --- the image ------------------------------------------------------------------------------


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_dockerfile_copies_what_the_settings_need():
    from .test_image import copied_files

    copied = {path.split("/")[0] for path in copied_files(ROOT).values()}
    urlconf_package = settings.ROOT_URLCONF.split(".")[0]
    template_dirs = [Path(d) for t in settings.TEMPLATES for d in t["DIRS"]]
    needed = {urlconf_package, "manage.py", *(p.relative_to(ROOT).parts[0] for p in template_dirs)}
    assert needed <= copied, needed - copied


def test_dockerfile_installs_the_pinned_dependencies_before_the_code():
    from .test_image import dockerfile_instructions

    instructions = [str(i) for i in dockerfile_instructions(dockerfile())]
    pinned = next(
        n
        for n, i in enumerate(instructions)
        if re.search(r"pip install -r \S+ -c constraints\.txt", i)
    )
    assert "tomllib" in instructions[pinned] and "['dependencies']" in instructions[pinned]
    # Code changes do not rebuild the dependency layer: only the files it reads come before it.
    copies = [n for n, i in enumerate(instructions) if i.startswith("COPY ")]
    assert [instructions[n] for n in copies if n < pinned] == [
        "COPY pyproject.toml constraints.txt ./"
    ]
    code = next(n for n in copies if n > pinned)
    assert instructions[code] == "COPY . ."
    assert any(
        i == "RUN pip install --no-deps . && rm -rf build ./*.egg-info" for i in instructions[code:]
    )


# Paths that must never reach an image, whatever the checkout holds beside the code: secrets and
# operator files kept next to docker-compose.yml (docs/production.md), local state, tests.
NEVER_IN_THE_IMAGE = (
    "var/secret_key",  # the embedded profile's key
    ".env",  # compose's secrets
    ".env.production",
    "production.env",  # the override file's settings (docs/production.md, section 3)
    "docker-compose.override.yml",
    "a2a-2026-01-31.dump",  # a backup, as section 7 makes it, in the compose directory
    "tls/a2a.example.com.key",
    "executors/acme_agents-1.0-py3-none-any.whl",  # a derived image's build context
    ".venv/bin/python",
    ".git/config",
    "test-artifacts/screenshots/a.png",
    "tests/conftest.py",
    "docs/production.md",
    "Dockerfile",
    "console/__pycache__/models.cpython-311.pyc",
    "agents/__pycache__/models.cpython-311.pyc",
    "a2a_platform.egg-info/PKG-INFO",
    "build/lib/agents/models.py",
)


def test_dockerignore_keeps_secrets_and_local_state_out_and_the_code_in():
    from .test_image import build_context, dockerignore_patterns, ignored

    patterns = dockerignore_patterns((ROOT / ".dockerignore").read_text())
    for path in NEVER_IN_THE_IMAGE:
        assert ignored(path, patterns), f"{path} would go into the image"
    # The build context as docker build would send it from this checkout: the packages, the
    # pins and the entry point, nothing else.
    tops = {path.split("/")[0] for path in build_context(ROOT)}
    assert tops == {*_project_packages(), "manage.py", "pyproject.toml", "constraints.txt"}


# --- the pins -----------------------------------------------------------------------------------


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (specifier,) = requirement.specifier
            assert specifier.operator == "==", line
            pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _runtime_closure() -> dict[str, set[str]]:
    """Every distribution pyproject.toml's dependencies need here, with the extras asked of it."""
    from .test_image import distribution_closure

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return distribution_closure(project["dependencies"])


def test_constraints_pin_every_runtime_dependency_at_the_installed_version():
    pins = constraints()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for raw in project["dependencies"]:
        requirement = Requirement(raw)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"constraints.txt does not pin {name} (make lock)"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} vs {raw}"
    for name in _runtime_closure():
        assert name in pins, f"constraints.txt does not pin {name}, which the platform needs"
        installed = importlib.metadata.version(name)
        assert installed == pins[name], (
            f"{name} {installed} is installed, constraints.txt pins {pins[name]}: make setup"
        )


def test_make_setup_installs_the_pins_and_make_lock_writes_them():
    makefile = (ROOT / "Makefile").read_text()
    stamp_rule = re.search(r"^\$\(STAMP\): (.*)$", makefile, re.M)
    assert stamp_rule and "constraints.txt" in stamp_rule.group(1).split()
    assert re.search(r"pip install .*-c constraints\.txt -e '\.\[dev,bench\]'", makefile)
    assert re.search(r"^lock:", makefile, re.M) and "scripts/lock.py" in makefile


# --- beat's liveness record and `manage.py healthcheck` -----------------------------------------


@pytest.fixture
def db_env(transactional_db: Any, tmp_path: Path) -> dict[str, str]:
    """An environment for a subprocess on the test database (committed rows only), with beat's
    filesystem broker in tmp_path, so no periodic task reaches another test's workers."""
    db = connection.settings_dict
    require(db["ENGINE"].endswith("postgresql"), "these tests need PostgreSQL (run `make test`)")
    return {
        **os.environ,
        "DATABASE_URL": database_url(db["HOST"], db["PORT"]),
        "CELERY_BROKER_URL": "filesystem://",
        "A2A_VAR_DIR": str(tmp_path / "var"),
        "PYTHONPATH": str(ROOT),
    }


def database_url(host: str, port: str | int) -> str:
    db = connection.settings_dict
    password = f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else ""
    return f"postgres://{quote(db['USER'], safe='')}{password}@{host}:{port}/{db['NAME']}"


def manage(
    *arguments: str, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _one_line(done: subprocess.CompletedProcess) -> str:
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_beat_scheduler_records_its_ticks_and_healthcheck_beat_reads_them(db_env, tmp_path):
    from celery import Celery

    from a2a_platform.beat import (
        HEARTBEAT_SECONDS,
        Scheduler,
        beat_last_tick,
        beat_stale_after_seconds,
    )
    from console.models import BeatHeartbeat

    # given no beat has ever ticked
    assert beat_last_tick() is None
    done = manage("healthcheck", "beat", env=db_env)
    assert done.returncode == 1 and "no tick recorded" in _one_line(done)

    # when the scheduler ticks (an app of its own with no entries: nothing is sent anywhere)
    app = Celery("beat-test", broker="memory://", set_as_current=False)
    app.conf.beat_schedule = {}
    scheduler = Scheduler(app=app, schedule_filename=str(tmp_path / "schedule"))
    before = timezone.now()
    try:
        scheduler.tick()
        scheduler.tick()  # within HEARTBEAT_SECONDS: not written again
        first = wait_logged(beat_last_tick, "the scheduler recorded no tick")
        time.sleep(1)
        again = beat_last_tick()
    finally:
        scheduler.close()

    # then the tick is recorded once, and the healthcheck sees a live beat
    assert before <= first <= timezone.now()
    assert again == first and HEARTBEAT_SECONDS > 1
    done = manage("healthcheck", "beat", env=db_env)
    assert done.returncode == 0, done.stderr
    assert _one_line(done).startswith("beat: ticked ")

    # a tick older than the limit is a dead beat
    stale = timezone.now() - timedelta(seconds=beat_stale_after_seconds() + 2)
    BeatHeartbeat.objects.update(ticked_at=stale)
    done = manage("healthcheck", "beat", env=db_env)
    assert done.returncode == 1 and "over the" in _one_line(done)


def test_beat_stale_after_follows_the_schedule(settings):
    from a2a_platform.beat import HEARTBEAT_SECONDS, STALE_AFTER_GAPS, beat_stale_after_seconds

    shortest = min(e["schedule"] for e in settings.CELERY_BEAT_SCHEDULE.values())
    assert beat_stale_after_seconds() == STALE_AFTER_GAPS * max(shortest, HEARTBEAT_SECONDS)
    # beat ticks for its soonest entry: an hourly one beside it does not lengthen the gap
    settings.CELERY_BEAT_SCHEDULE = {
        "often": {"task": "t", "schedule": 7.0},
        "hourly": {"task": "t", "schedule": timedelta(hours=1)},
    }
    assert beat_stale_after_seconds() == STALE_AFTER_GAPS * 7
    # and at least every beat_max_loop_interval (300 s) whatever its entries say
    settings.CELERY_BEAT_SCHEDULE = {"daily": {"task": "t", "schedule": timedelta(days=1)}}
    assert beat_stale_after_seconds() == STALE_AFTER_GAPS * 300
    settings.CELERY_BEAT_SCHEDULE = {"often": {"task": "t", "schedule": 1.0}}
    assert beat_stale_after_seconds() == STALE_AFTER_GAPS * HEARTBEAT_SECONDS


def start_beat(env: dict[str, str], tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """celery beat as compose starts it (its command, the schedule file in tmp_path)."""
    command = list(compose()["services"]["beat"]["command"])
    command[0] = str(VENV_BIN / "celery")
    command[command.index("--schedule") + 1] = str(tmp_path / "celerybeat-schedule")
    log = tmp_path / "beat.log"
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT
    )
    return proc, log


def wait_logged(predicate: Any, what: str, log: Path | None = None, timeout: float = 30) -> Any:
    """predicate()'s first true value; `what` (and the log's end) if none comes in time."""
    if value := poll(predicate, timeout=timeout):
        return value
    raise AssertionError(f"{what} within {timeout} s:\n{log.read_text()[-4000:] if log else ''}")


def test_beat_started_as_compose_starts_it_is_healthy(db_env, tmp_path):
    from a2a_platform.beat import beat_last_tick

    beat, log = start_beat(db_env, tmp_path)
    try:
        wait_logged(beat_last_tick, "beat recorded no tick", log)
        done = manage("healthcheck", "beat", env=db_env)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        stop_process(beat)
    assert "a2a_platform.beat.Scheduler" in log.read_text()


class TcpForwarder:
    """A TCP forwarder to the database on a fixed local port, as the processes that use the
    database see it: it can stop (connections refused and cut: the database is down), pause
    (bytes held: the network hangs) and come back."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = _free_port()
        self._sockets: list[socket.socket] = []
        self._running = threading.Event()
        self._flowing = threading.Event()
        self._flowing.set()

    def start(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        listener.settimeout(0.1)
        self._running.set()
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        self._running.clear()
        time.sleep(0.3)  # the accept loop closes the listener
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._sockets.clear()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._running.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                client.settimeout(None)
                upstream = socket.create_connection(self.target)
                self._sockets += [client, upstream]
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


def test_beat_goes_on_while_the_database_is_away(db_env, tmp_path):
    """Beat goes on sending the periodic tasks while its record cannot be written: while the
    write hangs on a database that does not answer, and when the database is down (it logs
    that it could not record its tick); once the database is back, it records again."""
    from a2a_platform.beat import HEARTBEAT_SECONDS, beat_last_tick

    db = connection.settings_dict
    forwarder = TcpForwarder((db["HOST"], int(db["PORT"])))
    forwarder.start()
    env = {
        **db_env,
        "DATABASE_URL": database_url("127.0.0.1", forwarder.port),
        "A2A_REAPER_INTERVAL_SECONDS": "0.5",  # beat sends a task twice a second
    }
    queue = Path(env["A2A_VAR_DIR"]) / "broker" / "queue"

    def sent() -> int:
        return len(list(queue.iterdir()))

    beat, log = start_beat(env, tmp_path)
    try:
        first = wait_logged(beat_last_tick, "beat recorded no tick", log)

        # The database does not answer: the next write hangs, and beat sends on.
        forwarder.pause()
        count = sent()
        for _ in range(int(HEARTBEAT_SECONDS) // 2 + 1):  # past one heartbeat, still hanging
            time.sleep(2)
            assert sent() > count, f"beat stopped sending tasks:\n{log.read_text()[-4000:]}"
            count = sent()
        forwarder.resume()
        second = wait_logged(
            lambda: (tick := beat_last_tick()) and tick > first and tick,
            "beat did not record its ticks once the database answered again",
            log,
        )

        # The database is down: the write fails, beat says so and goes on.
        forwarder.stop()
        wait_logged(
            lambda: "could not record its tick" in log.read_text(),
            "beat logged no failed write",
            log,
        )
        count = sent()
        wait_logged(lambda: sent() > count, "beat stopped sending tasks", log, timeout=5)
        assert beat.poll() is None, log.read_text()[-4000:]
        forwarder.start()
        wait_logged(
            lambda: (tick := beat_last_tick()) and tick > second,
            "beat did not record its ticks again once the database was back",
            log,
            timeout=60,
        )
        assert beat.poll() is None
    finally:
        stop_process(beat)
        forwarder.stop()


@pytest.mark.e2e
def test_healthcheck_worker_pings_this_hosts_worker_of_the_queue(live_platform):
    # The fixture's push and maintenance workers are push@%h and maintenance@%h, as compose
    # names them; an agents worker named as compose names it joins them. (Each healthcheck is
    # a process of its own: those two are asked while the agents worker starts.)
    with ThreadPoolExecutor(max_workers=3) as pool:
        pinged = {
            queue: pool.submit(manage, "healthcheck", "worker", queue, env=live_platform.env)
            for queue in ("push", "maintenance")
        }
        agents = live_platform.start_worker("agents", "agents")
        try:
            pinged["agents"] = pool.submit(
                manage, "healthcheck", "worker", "agents", env=live_platform.env
            )
            for queue in ("agents", "push", "maintenance"):
                done = pinged[queue].result()
                assert done.returncode == 0, done.stdout + done.stderr
                assert _one_line(done) == f"worker {queue}@{socket.gethostname()}: pong"
        finally:
            stop_process(agents)


@pytest.mark.e2e
def test_healthcheck_worker_without_a_worker_or_a_broker_fails_in_bounded_time(live_platform):
    broker = live_platform.env.get("CELERY_BROKER_URL", "")
    require(broker.startswith("redis://"), "this test needs the Redis broker (run `make test`)")
    closed = f"redis://127.0.0.1:{_free_port()}/0"
    cases = (
        (broker.rsplit("/", 1)[0] + "/7", "no answer within 1 s"),  # a broker no worker reads
        (closed, "broker unreachable"),
    )

    def healthcheck(url: str) -> tuple[subprocess.CompletedProcess, float]:
        env = {**live_platform.env, "CELERY_BROKER_URL": url}
        started = time.monotonic()
        done = manage("healthcheck", "worker", "agents", "--timeout", "1", env=env, timeout=30)
        return done, time.monotonic() - started

    # The two at once: each is a process of its own, and each is timed on its own.
    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        checked = list(pool.map(healthcheck, [url for url, _ in cases]))
    for (_, says), (done, took) in zip(cases, checked, strict=True):
        assert done.returncode == 1, done.stdout + done.stderr
        assert says in _one_line(done)
        assert took < 15
