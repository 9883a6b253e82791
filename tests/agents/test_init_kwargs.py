"""A `python` agent's init_kwargs and secrets are checked on save against its class's
constructor (what the platform passes it is exactly those two): a keyword the constructor does
not take, or one it needs that neither gives, is an error on its field, on every path, before
anything is written; what it takes builds the executor."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agents.admin import AgentForm
from agents.crypto import decrypt
from agents.executors import agent_executor_build
from agents.models import Agent
from agents.services import agent_create, agent_secrets_set
from tests.agents.sample_executors import GreetingExecutor, OptionsExecutor
from tests.agents.test_admin_agents import agent_form

SAMPLES = "tests.agents.sample_executors."
SHOUTING, GREETING = SAMPLES + "ShoutingExecutor", SAMPLES + "GreetingExecutor"
OPTIONS, POSITIONAL = SAMPLES + "OptionsExecutor", SAMPLES + "PositionalExecutor"


@pytest.fixture(autouse=True)
def allowlist(settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING, GREETING, OPTIONS, POSITIONAL]


def register(tenant, class_path, init_kwargs=None, secrets=None, slug="py"):
    return agent_create(
        tenant=tenant,
        slug=slug,
        name="Py",
        description="d",
        executor_kind="python",
        executor_config={"class_path": class_path, "init_kwargs": init_kwargs or {}},
        executor_secrets=secrets,
    )


def errors_of(excinfo: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return excinfo.value.message_dict


def test_a_keyword_the_constructor_does_not_take_is_refused_on_init_kwargs(make_tenant):
    with pytest.raises(ValidationError) as excinfo:
        register(make_tenant(), SHOUTING, {"sufix": "?"})
    assert errors_of(excinfo) == {
        "executor_config": [
            f"init_kwargs: {SHOUTING} takes no keyword argument sufix (it takes suffix)."
        ]
    }
    assert not Agent.objects.exists()


def test_a_secret_the_constructor_does_not_take_is_refused_on_the_secrets(make_tenant):
    with pytest.raises(ValidationError) as excinfo:
        register(make_tenant(), SHOUTING, secrets={"api_key": "k"})
    assert errors_of(excinfo) == {
        "executor_secrets": [
            f"{SHOUTING} takes no keyword argument api_key, and each secret is passed as one "
            "(it takes suffix)."
        ]
    }


def test_a_keyword_the_constructor_needs_comes_from_init_kwargs_or_a_secret(make_tenant):
    tenant = make_tenant()
    # neither gives it: refused, saying where it may come from
    with pytest.raises(ValidationError) as excinfo:
        register(tenant, GREETING, {"api_key": "k"})
    assert errors_of(excinfo) == {
        "executor_config": [
            f"init_kwargs: {GREETING} needs greeting: give it in init_kwargs, or as a secret."
        ]
    }
    # either gives it: saved, and the executor is built with it
    for slug, kwargs, secrets in (
        ("plain", {"greeting": "Hi"}, None),
        ("kept", {}, {"greeting": "Hey"}),
    ):
        agent = register(tenant, GREETING, kwargs, secrets, slug=slug)
        executor = agent_executor_build(agent=agent)
        assert isinstance(executor, GreetingExecutor)
        assert executor.greeting == (kwargs or secrets)["greeting"]


def test_a_constructor_that_takes_any_keyword_takes_them_all(make_tenant):
    agent = register(make_tenant(), OPTIONS, {"greeting": "Yo", "colour": "red"}, {"token": "t"})
    assert isinstance(agent_executor_build(agent=agent), OptionsExecutor)


def test_a_constructor_needing_a_positional_argument_cannot_be_used(make_tenant):
    with pytest.raises(ValidationError) as excinfo:
        register(make_tenant(), POSITIONAL, {"greeting": "Hi"})
    message = " ".join(errors_of(excinfo)["executor_config"])
    assert "needs positional arguments (greeting), which no agent can give" in message


def test_replacing_the_secrets_is_checked_against_the_constructor_too(make_tenant):
    # given an agent whose greeting is a secret
    agent = register(make_tenant(), GREETING, secrets={"greeting": "Hey", "token": "t"})
    # when the secrets are replaced by ones without it, or with one it does not take
    with pytest.raises(ValidationError, match="needs greeting"):
        agent_secrets_set(agent=agent, secrets={"token": "t2"})
    with pytest.raises(ValidationError, match="takes no keyword argument colour"):
        agent_secrets_set(agent=agent, secrets={"greeting": "Hey", "colour": "red"})
    # then the stored ones stay
    stored = Agent.objects.get(pk=agent.pk).executor_secrets_encrypted
    assert json.loads(decrypt(stored)) == {"greeting": "Hey", "token": "t"}


def test_create_agent_says_it_in_one_line(make_tenant):
    tenant = make_tenant()
    with pytest.raises(CommandError) as excinfo:
        call_command(
            "create_agent",
            tenant.slug,
            "greeter",
            "--kind",
            "python",
            "--config",
            json.dumps({"class_path": GREETING}),
            "--secret",
            "colour=red",
        )
    assert str(excinfo.value) == (
        f"executor_config: init_kwargs: {GREETING} needs greeting: give it in init_kwargs, or "
        f"as a secret.; executor_secrets: {GREETING} takes no keyword argument colour, and each "
        "secret is passed as one (it takes api_key, greeting, token)."
    )
    assert not Agent.objects.filter(tenant=tenant).exists()


def test_the_admin_form_shows_it_on_the_config(make_tenant):
    tenant = make_tenant()
    config = {"class_path": SHOUTING, "init_kwargs": {"loud": True}}
    form = AgentForm(agent_form(tenant, executor_config=json.dumps(config)))
    assert not form.is_valid()
    assert form.errors["executor_config"] == [
        f"init_kwargs: {SHOUTING} takes no keyword argument loud (it takes suffix)."
    ]
