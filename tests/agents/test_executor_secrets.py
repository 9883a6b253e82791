"""Executor secrets: checked, encrypted at rest, given to a `python` executor's constructor
beside init_kwargs (a name in one of the two only), set and cleared by the service and
create_agent, never printed; and a python agent using one in a run on the live platform."""

from __future__ import annotations

import asyncio
import json

import pytest
from a2a.types import TaskState
from cryptography.fernet import Fernet
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection

from agents.crypto import DecryptionFailed, decrypt
from agents.executors import agent_executor_build, executor_build
from agents.executors.python import PythonConfig
from agents.executors.secrets import (
    SECRET_MAX_LENGTH,
    SECRETS_MAX,
    executor_secret_names,
    executor_secrets_seal,
    executor_secrets_validate,
)
from agents.forms import ExecutorSecretsField, executor_secrets_status
from agents.models import Agent
from agents.services import agent_secrets_set
from agents.validation import agent_validate
from tests.agents.sample_executors import ShoutingExecutor
from tests.e2e.clients import V1_0, sdk_client, send, user_message

SHOUTING = "tests.agents.sample_executors.ShoutingExecutor"
GREETING = "tests.agents.sample_executors.GreetingExecutor"
SECRET = "s3cr3t-Value-9f2c"


@pytest.fixture
def allowlist(settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING, GREETING]
    return settings


@pytest.fixture
def shouter(allowlist, make_tenant, make_agent):
    """A python agent whose executor gets its `suffix` as a secret."""
    return make_agent(
        make_tenant(),
        "shouter",
        kind="python",
        config={"class_path": SHOUTING},
        executor_secrets={"suffix": SECRET},
    )


def stored_column(agent: Agent) -> str:
    """The secrets column as the database holds it, read around the ORM."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT executor_secrets_encrypted FROM {Agent._meta.db_table} WHERE id = %s",
            [agent.pk],
        )
        return str(cursor.fetchone()[0])


def secrets_errors(excinfo: pytest.ExceptionInfo[ValidationError]) -> list[str]:
    return excinfo.value.message_dict["executor_secrets"]


# --- the rules ------------------------------------------------------------------------------


def test_valid_secrets_come_back_sorted_by_name():
    assert list(executor_secrets_validate({"token": "b", "api_key": "a"}).items()) == [
        ("api_key", "a"),
        ("token", "b"),
    ]
    assert executor_secrets_validate({}) == {}


@pytest.mark.parametrize(
    "secrets, problem",
    [
        (["api_key", SECRET], "JSON object"),
        ({"api-key": SECRET}, "secret #1 is not a Python identifier"),
        ({"ok": "x", SECRET: "y"}, "secret #2 is not a Python identifier"),
        ({"class": SECRET}, "not a Python identifier"),
        ({"a" * 65: SECRET}, "longer than 64 characters"),
        ({"api_key": 12345}, "api_key: the secret must be a string"),
        ({"api_key": ""}, "api_key: the secret is empty"),
        ({"api_key": SECRET * 1000}, f"longer than {SECRET_MAX_LENGTH} characters"),
        ({f"s{i}": SECRET for i in range(SECRETS_MAX + 1)}, f"At most {SECRETS_MAX} secrets"),
    ],
)
def test_invalid_secrets_are_refused_without_quoting_a_value(secrets, problem):
    with pytest.raises(ValidationError) as excinfo:
        executor_secrets_validate(secrets)
    message = " ".join(secrets_errors(excinfo))
    assert problem in message
    assert SECRET not in message and "12345" not in message


def test_init_kwargs_help_points_to_the_secrets():
    schema = PythonConfig.model_json_schema()["properties"]["init_kwargs"]
    assert "executor secrets" in schema["description"]


# --- at rest --------------------------------------------------------------------------------


def test_secrets_are_stored_encrypted_and_only_in_their_column(shouter):
    raw = stored_column(shouter)
    assert raw and SECRET not in raw
    assert json.loads(decrypt(raw)) == {"suffix": SECRET}
    stored = Agent.objects.get(pk=shouter.pk)
    assert SECRET not in json.dumps(stored.executor_config)
    assert executor_secret_names(stored.executor_secrets_encrypted) == ["suffix"]
    assert executor_secrets_status(stored) == "Set: suffix"


def test_an_agent_without_secrets_stores_nothing(allowlist, make_tenant, make_agent):
    agent = make_agent(make_tenant(), "plain", kind="python", config={"class_path": SHOUTING})
    assert stored_column(agent) == ""
    assert executor_secrets_status(agent) == "Not set"


# --- a name comes from one place -------------------------------------------------------------


def test_a_secret_named_in_init_kwargs_too_is_refused_at_registration(
    allowlist, make_tenant, make_agent
):
    with pytest.raises(ValidationError) as excinfo:
        make_agent(
            make_tenant(),
            "clash",
            kind="python",
            config={"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}},
            executor_secrets={"suffix": SECRET},
        )
    message = " ".join(secrets_errors(excinfo))
    assert "suffix: given both in the executor config and as a secret" in message
    assert SECRET not in message
    assert not Agent.objects.filter(slug="clash").exists()


def test_kinds_that_take_no_secrets_refuse_them(make_tenant, make_agent):
    with pytest.raises(ValidationError) as excinfo:
        make_agent(make_tenant(), "echo", executor_secrets={"api_key": SECRET})
    assert "The echo executor takes no secrets" in secrets_errors(excinfo)[0]


def test_a_config_change_that_clashes_with_stored_secrets_is_refused(shouter):
    # given an agent whose stored secrets name `suffix`
    agent = Agent.objects.get(pk=shouter.pk)
    # when its config is changed to set `suffix` as well
    agent.executor_config = {"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}}
    # then validation (as every form and service runs it) refuses the change
    with pytest.raises(ValidationError) as excinfo:
        agent_validate(agent)
    assert "suffix: given both" in secrets_errors(excinfo)[0]
    # and a kind that takes no secrets is refused while secrets are stored
    agent.executor_kind, agent.executor_config = "echo", {}
    with pytest.raises(ValidationError, match="takes no secrets"):
        agent_validate(agent)


# --- the service ----------------------------------------------------------------------------


def test_the_service_replaces_and_clears_the_secrets(shouter):
    before = stored_column(shouter)
    agent_secrets_set(agent=shouter, secrets={"suffix": "other"})
    after = stored_column(shouter)
    assert after != before and json.loads(decrypt(after)) == {"suffix": "other"}
    agent_secrets_set(agent=shouter, secrets={})
    assert stored_column(shouter) == ""
    assert Agent.objects.get(pk=shouter.pk).executor_secrets_encrypted == ""


def test_the_service_checks_against_the_stored_config_and_keeps_the_old_secrets(
    allowlist, make_tenant, make_agent
):
    agent = make_agent(
        make_tenant(),
        "asker",
        kind="python",
        config={"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}},
    )
    with pytest.raises(ValidationError, match="suffix: given both"):
        agent_secrets_set(agent=agent, secrets={"suffix": SECRET})
    with pytest.raises(ValidationError, match="not a Python identifier"):
        agent_secrets_set(agent=agent, secrets={"not valid": SECRET})
    assert stored_column(agent) == ""


# --- building the executor ------------------------------------------------------------------


def test_the_executor_is_built_with_the_decrypted_secrets(shouter):
    executor = agent_executor_build(agent=Agent.objects.get(pk=shouter.pk))
    assert isinstance(executor, ShoutingExecutor)
    assert executor.suffix == SECRET


def test_building_refuses_a_clash_that_predates_the_rule(allowlist):
    config = {"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}}
    with pytest.raises(ValidationError, match="suffix: given both"):
        executor_build(kind="python", config=config, secrets={"suffix": SECRET})
    with pytest.raises(ValidationError, match="takes no secrets"):
        executor_build(kind="echo", config={}, secrets={"api_key": SECRET})


def test_secrets_no_key_opens_fail_the_build_and_ask_to_be_set_again(shouter, settings):
    # given secrets stored under the key of the moment
    agent = Agent.objects.get(pk=shouter.pk)
    # when the operator replaces the keys (instead of prepending a new one)
    settings.A2A_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    # then building fails, editing asks for the secrets again, and pages say so
    with pytest.raises(DecryptionFailed):
        agent_executor_build(agent=agent)
    with pytest.raises(ValidationError) as excinfo:
        agent_validate(agent)
    assert "Set the secrets again, or clear them." in secrets_errors(excinfo)[0]
    assert executor_secrets_status(agent).startswith("Set, but no configured encryption key")
    agent_secrets_set(agent=agent, secrets={"suffix": "new"})
    assert agent_executor_build(agent=agent).suffix == "new"


# --- the form field (admin and console) ------------------------------------------------------


def test_the_form_field_keeps_on_empty_and_never_renders_or_quotes_a_value():
    field = ExecutorSecretsField()
    assert field.clean("") is None and field.clean("  ") is None
    assert field.clean(json.dumps({"suffix": SECRET})) == {"suffix": SECRET}
    with pytest.raises(ValidationError) as excinfo:
        field.clean('{"suffix": "' + SECRET)  # unterminated
    assert SECRET not in " ".join(excinfo.value.messages)
    html = field.widget.render("executor_secrets", json.dumps({"suffix": SECRET}))
    assert SECRET not in html and "suffix" not in html


# --- create_agent ---------------------------------------------------------------------------


def test_create_agent_stores_secrets_and_prints_only_their_names(allowlist, make_tenant, capsys):
    tenant = make_tenant()
    call_command(
        "create_agent",
        tenant.slug,
        "shouter",
        "--kind",
        "python",
        "--config",
        json.dumps({"class_path": GREETING, "init_kwargs": {"greeting": "Hello"}}),
        "--secret",
        f"token={SECRET}=with-equals",
        "--secret",
        "api_key=x",
    )
    out = capsys.readouterr().out
    assert "executor secrets stored encrypted: api_key, token" in out
    assert SECRET not in out
    agent = Agent.objects.get(tenant=tenant, slug="shouter")
    assert json.loads(decrypt(stored_column(agent)))["token"] == f"{SECRET}=with-equals"


@pytest.mark.parametrize(
    "secrets, problem",
    [
        ([SECRET], "--secret #1 must be NAME=VALUE"),
        (["suffix=a", "suffix=b"], "--secret #2 repeats the name of an earlier one"),
        (["api-key=" + SECRET], "is not a Python identifier"),
        (["suffix=x"], "suffix: given both"),
    ],
)
def test_create_agent_refuses_bad_secrets_without_printing_them(
    allowlist, make_tenant, secrets, problem
):
    tenant = make_tenant()
    config = {"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}}
    arguments = [a for s in secrets for a in ("--secret", s)]
    with pytest.raises(CommandError) as excinfo:
        call_command(
            "create_agent",
            tenant.slug,
            "shouter",
            "--kind",
            "python",
            "--config",
            json.dumps(config),
            *arguments,
        )
    assert problem in str(excinfo.value) and SECRET not in str(excinfo.value)
    assert not Agent.objects.filter(tenant=tenant).exists()


# --- through the live platform ------------------------------------------------------------


def _run_once(live_platform, make_tenant, make_agent, make_key, slug, secrets, *, stored=None):
    """One message to a new python agent (ShoutingExecutor) with `secrets`, on the live
    platform; the task as the SDK client got it. agent_create validates here; the live
    worker's own env allowlists ShoutingExecutor, and it decrypts with this process's keys
    (its env is this process's). `stored`: secrets written past the checks afterwards, as an
    agent saved before a rule (or before its class changed) may hold them."""
    tenant = make_tenant()
    agent = make_agent(
        tenant, slug, kind="python", config={"class_path": SHOUTING}, executor_secrets=secrets
    )
    if stored is not None:
        Agent.objects.filter(pk=agent.pk).update(
            executor_secrets_encrypted=executor_secrets_seal(stored)
        )
    url, key = live_platform.agent_url(agent), make_key(tenant)

    async def scenario():
        async with sdk_client(url, key=key, version=V1_0) as client:
            return await send(client, user_message("hello", f"{slug}-1"))

    return asyncio.run(scenario()).task


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_python_agent_gets_its_secret_in_a_run(
    live_platform, make_tenant, make_agent, make_key, allowlist
):
    secrets = {"suffix": f" {SECRET}"}
    task = _run_once(live_platform, make_tenant, make_agent, make_key, "shouter", secrets)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == [f"HELLO {SECRET}"]


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_an_executor_that_cannot_start_with_secrets_says_only_the_errors_kind(
    live_platform, make_tenant, make_agent, make_key, allowlist
):
    # given a python agent whose secrets its class does not take (saving refuses them now;
    # an agent stored before, or whose class changed since, may hold them): its
    # constructor's error quotes what it was given
    secrets = {"volume_of_" + SECRET.replace("-", "_"): SECRET}
    # when a message comes, then the task fails naming the kind of error, and nothing else
    task = _run_once(live_platform, make_tenant, make_agent, make_key, "misfit", {}, stored=secrets)
    assert task.status.state == TaskState.TASK_STATE_FAILED
    reason = " ".join(p.text for p in task.status.message.parts)
    assert "TypeError (its message is withheld" in reason, reason
    assert SECRET not in reason and SECRET.replace("-", "_") not in reason
