"""The executor registry: config validation of every kind, the `python` kind's allowlist, and a
`python` agent answering through the live platform."""

from __future__ import annotations

import asyncio

import pytest
from a2a.types import TaskState
from django.core.exceptions import ValidationError

from agents.executors import REGISTRY, executor_build, executor_config_validate
from tests.agents.sample_executors import ShoutingExecutor
from tests.e2e.clients import V0_3, V1_0, sdk_client, send, user_message

SHOUTING = "tests.agents.sample_executors.ShoutingExecutor"
NOT_AN_EXECUTOR = "tests.agents.sample_executors.NotAnExecutor"
MISSING = "tests.agents.sample_executors.NoSuchExecutor"


@pytest.fixture
def allowlist(settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING, NOT_AN_EXECUTOR, MISSING]
    return settings


def errors_of(excinfo: pytest.ExceptionInfo[ValidationError]) -> dict[str, list[str]]:
    return excinfo.value.message_dict


def test_registry_has_the_six_kinds():
    assert set(REGISTRY) == {"echo", "conformance", "python", "openai", "a2a-proxy", "webhook"}


def test_valid_configs_are_normalised_with_defaults():
    assert executor_config_validate(kind="conformance", config={}) == {
        "step_seconds": 0.5,
        "resubscribe_wait_seconds": 4.0,
    }
    assert executor_config_validate(
        kind="conformance", config={"step_seconds": 0.2, "resubscribe_wait_seconds": 0}
    ) == {"step_seconds": 0.2, "resubscribe_wait_seconds": 0.0}
    assert executor_config_validate(kind="echo", config={"delay_seconds": 1}) == {
        "input_required": False,
        "delay_seconds": 1.0,
    }


def test_unknown_kind_is_rejected():
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="shell", config={})
    errors = errors_of(excinfo)
    assert list(errors) == ["executor_kind"]
    assert "'shell'" in errors["executor_kind"][0]


def test_config_must_be_an_object():
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="echo", config=["delay_seconds", 1])
    assert list(errors_of(excinfo)) == ["executor_config"]


@pytest.mark.parametrize(
    "kind, config, field",
    [
        ("conformance", {"step_secs": 1}, "step_secs"),
        ("echo", {"delay": 1}, "delay"),
        ("python", {"class_path": SHOUTING, "kwargs": {}}, "kwargs"),
    ],
)
def test_unknown_config_keys_are_rejected(allowlist, kind, config, field):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind=kind, config=config)
    message = errors_of(excinfo)["executor_config"][0]
    assert message.startswith(f"{field} is not a known field; the fields are ")


@pytest.mark.parametrize(
    "kind, config, field",
    [
        ("conformance", {"step_seconds": "fast"}, "step_seconds"),
        ("conformance", {"resubscribe_wait_seconds": [4]}, "resubscribe_wait_seconds"),
        ("echo", {"delay_seconds": "soon"}, "delay_seconds"),
        ("echo", {"input_required": "perhaps"}, "input_required"),
        ("python", {"class_path": 42}, "class_path"),
        ("python", {"class_path": SHOUTING, "init_kwargs": ["suffix"]}, "init_kwargs"),
    ],
)
def test_wrong_types_are_rejected(allowlist, kind, config, field):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind=kind, config=config)
    assert errors_of(excinfo)["executor_config"][0].startswith(f"{field} must be ")


@pytest.mark.parametrize(
    "kind, config, field",
    [
        ("conformance", {"step_seconds": -0.1}, "step_seconds"),
        ("conformance", {"resubscribe_wait_seconds": -1}, "resubscribe_wait_seconds"),
        ("echo", {"delay_seconds": -5}, "delay_seconds"),
    ],
)
def test_negative_delays_are_rejected(kind, config, field):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind=kind, config=config)
    message = errors_of(excinfo)["executor_config"][0]
    assert message == f"{field} must be greater than or equal to 0."


def test_python_class_path_is_required(allowlist):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="python", config={})
    assert errors_of(excinfo)["executor_config"] == ["class_path is required."]


def test_python_class_path_outside_the_allowlist_is_rejected(settings):
    settings.A2A_PYTHON_EXECUTORS = [NOT_AN_EXECUTOR]
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="python", config={"class_path": SHOUTING})
    message = errors_of(excinfo)["executor_config"][0]
    assert "is not in the operator's allowlist A2A_PYTHON_EXECUTORS" in message
    assert f"'{SHOUTING}'" in message


def test_python_with_an_empty_allowlist_is_rejected(settings):
    settings.A2A_PYTHON_EXECUTORS = []
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="python", config={"class_path": SHOUTING})
    assert "(empty)" in errors_of(excinfo)["executor_config"][0]


def test_python_class_path_that_cannot_be_imported_is_rejected(allowlist):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="python", config={"class_path": MISSING})
    assert f"'{MISSING}' cannot be imported" in errors_of(excinfo)["executor_config"][0]


def test_python_class_that_is_not_an_agent_executor_is_rejected(allowlist):
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind="python", config={"class_path": NOT_AN_EXECUTOR})
    assert (
        f"'{NOT_AN_EXECUTOR}' is not an a2a-sdk AgentExecutor subclass"
        in errors_of(excinfo)["executor_config"][0]
    )


def test_python_allowlisted_executor_validates_and_builds(allowlist):
    config = {"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}}
    assert executor_config_validate(kind="python", config=config) == config
    executor = executor_build(kind="python", config=config)
    assert isinstance(executor, ShoutingExecutor)
    assert executor.suffix == "?"


def test_build_validates_again(settings):
    # A config saved while the class was allowlisted is refused once the operator removes it.
    settings.A2A_PYTHON_EXECUTORS = []
    with pytest.raises(ValidationError):
        executor_build(kind="python", config={"class_path": SHOUTING})


# --- through the live platform ------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("version", [V1_0, V0_3])
def test_python_agent_answers_through_the_platform(
    live_platform, make_tenant, make_agent, make_key, settings, version
):
    # agent_create validates here; the live worker's own env allowlists ShoutingExecutor.
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING]
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "shouter",
        kind="python",
        config={"class_path": SHOUTING, "init_kwargs": {"suffix": "?"}},
    )
    url, key = live_platform.agent_url(agent), make_key(tenant)

    async def scenario():
        async with sdk_client(url, key=key, version=version) as client:
            return await send(client, user_message("hello", "shout-1"))

    task = asyncio.run(scenario()).task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert len(task.artifacts) == 1
    assert [p.text for p in task.artifacts[0].parts] == ["HELLO?"]
