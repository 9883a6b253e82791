"""docker-compose.yml, read and checked (there is no Docker engine here): the services it runs
are the processes the test suite runs natively, with settings the platform actually reads."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import yaml
from django.conf import settings
from django.core.management import get_commands

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
    """The project's own apps (and the settings package), as INSTALLED_APPS names them."""
    apps = [app.split(".")[0] for app in settings.INSTALLED_APPS]
    return ["a2a_platform", *(app for app in apps if (ROOT / app / "__init__.py").exists())]


def test_dockerfile_copies_every_package():
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in _project_packages():
        assert f"COPY {package} " in dockerfile


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
