"""Field errors in the platform's words: no "Value error, " and no pydantic "Input should be ..."
reaches the service's callers, the console's or the admin's forms or the commands; each names
its field (a config key, a form field's label, a skill) and the rule it breaks."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic import ValidationError as PydanticValidationError

from agents.admin import AgentForm
from agents.executors import REGISTRY, executor_config_validate
from agents.forms import label_of
from agents.wording import problems, where
from console.forms import AgentRegistrationForm
from tests.agents.test_admin_agents import agent_form

# What pydantic says in its own voice; none of it may reach a person.
PYDANTIC_WORDS = (
    "Input should",
    "Value error",
    "Field required",
    "Extra inputs",
    "String should",
    "should have at most",
    "List should",
    "Dictionary should",
    "unable to parse",
)


def plain(message: str) -> bool:
    return not any(words in message for words in PYDANTIC_WORDS)


class Sample(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=5)
    size: int = Field(default=1, ge=1, le=10)
    ratio: float = Field(default=0.5, gt=0, lt=1)
    mode: Literal["a", "b"] = "a"
    flag: bool = False
    items: list[str] = Field(default=[], max_length=2)
    extra: dict[str, Any] = {}

    @field_validator("name")
    @classmethod
    def _no_x(cls, value: str) -> str:
        if "x" in value:
            raise ValueError("a name has no x")
        return value


@pytest.mark.parametrize(
    "data, message",
    [
        ({}, "name is required."),
        ({"name": ""}, "name must not be empty."),
        ({"name": "abcdef"}, "name must be at most 5 characters long (it has 6)."),
        ({"name": "x"}, "name: a name has no x."),
        ({"name": 5}, "name must be text."),
        ({"name": "a", "size": 0}, "size must be greater than or equal to 1."),
        ({"name": "a", "size": 11}, "size must be less than or equal to 10."),
        ({"name": "a", "size": "many"}, "size must be a whole number."),
        ({"name": "a", "size": 1.5}, "size must be a whole number."),
        ({"name": "a", "ratio": 0}, "ratio must be greater than 0."),
        ({"name": "a", "ratio": 1}, "ratio must be less than 1."),
        ({"name": "a", "ratio": "half"}, "ratio must be a number."),
        ({"name": "a", "mode": "c"}, "mode must be one of 'a' or 'b'."),
        ({"name": "a", "flag": "perhaps"}, "flag must be true or false."),
        ({"name": "a", "items": "one"}, "items must be a list."),
        ({"name": "a", "items": ["1", "2", "3"]}, "items must have at most 2 items (it has 3)."),
        ({"name": "a", "items": [1]}, "items #1 must be text."),
        ({"name": "a", "extra": []}, "extra must be a JSON object."),
        ({"name": "a", "colour": "red"}, "colour is not a known field; the fields are name, size."),
    ],
)
def test_each_kind_of_error_is_said_plainly(data, message):
    with pytest.raises(PydanticValidationError) as excinfo:
        Sample.model_validate(data)
    assert problems(excinfo.value, known=["name", "size"]) == [message]


def test_a_location_is_said_as_people_count():
    assert where(["skills", 0, "tags", 2]) == "skills #1.tags #3"
    assert where([]) == ""


def _bad_values(info: Any) -> list[Any]:
    """Values a field of a config model refuses: the wrong type, and past each bound."""
    values: list[Any] = [["not", "a value"]]
    if info.annotation is not dict and getattr(info.annotation, "__origin__", None) is not dict:
        values.append({"nor": "this"})
    for item in info.metadata:
        for bound, past in (("ge", -1), ("gt", 0), ("le", 1), ("lt", 0)):
            limit = getattr(item, bound, None)
            if limit is not None:
                values.append(limit + past if bound in ("ge", "le") else limit)
        if getattr(item, "max_length", None):
            values.append("x" * (item.max_length + 1))
    return values


CASES = [
    (kind.name, key, value)
    for kind in REGISTRY.values()
    for key, info in kind.config_model.model_fields.items()
    for value in _bad_values(info)
]


@pytest.mark.parametrize("kind, key, value", CASES)
def test_no_config_error_of_any_kind_speaks_pydantic(settings, kind, key, value):
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.OptionsExecutor"]
    config = {
        "openai": {"base_url": "https://example.com/v1", "model": "m"},
        "a2a-proxy": {"card_url": "https://example.com/card.json"},
        "webhook": {"url": "https://example.com/run"},
        "python": {"class_path": "tests.agents.sample_executors.OptionsExecutor"},
    }.get(kind, {})
    with pytest.raises(ValidationError) as excinfo:
        executor_config_validate(kind=kind, config={**config, key: value})
    messages = excinfo.value.message_dict["executor_config"]
    assert messages and all(plain(m) for m in messages), messages
    assert any(m.startswith(f"{key} ") or m.startswith(f"{key}: ") for m in messages), messages


def test_unknown_keys_a_missing_key_and_an_allowlist_are_said_plainly(settings):
    settings.A2A_PYTHON_EXECUTORS = []
    for kind, config in (
        ("openai", {"temprature": 1}),
        ("python", {"class_path": "tests.agents.sample_executors.OptionsExecutor"}),
        ("a2a-proxy", {"card_url": "https://example.com/c", "api_key_header": "X Key"}),
    ):
        with pytest.raises(ValidationError) as excinfo:
            executor_config_validate(kind=kind, config=config)
        messages = excinfo.value.message_dict["executor_config"]
        assert all(plain(m) for m in messages), messages
    assert messages == [
        "api_key_header: use a header name of letters, digits and hyphens, e.g. X-API-Key."
    ]


@pytest.mark.django_db
def test_the_console_form_names_each_field_by_its_label(make_tenant, settings):
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.ShoutingExecutor"]
    tenant = make_tenant()
    for kind, changes in (
        ("openai", {"temperature": "3", "max_tokens": "many", "timeout_seconds": "0"}),
        ("a2a-proxy", {"binding": "SOAP", "api_key_header": "X Key", "card_url": ""}),
        ("webhook", {"url": "u" * 2001, "callback_timeout_seconds": "-1"}),
        ("echo", {"delay_seconds": "soon"}),
        ("python", {"class_path": "not.Allowed", "init_kwargs": '{"1": 2}'}),
    ):
        slug = kind.replace("-", "_")
        data = {
            "slug": f"form-{slug}",
            "name": "N",
            "description": "d",
            "executor_kind": kind,
            "visibility": "private",
            "anonymous_scope": "isolated",
            "worker_loss": "fail",
            "worker_loss_attempts": "3",
            **{f"cfg__{slug}__{key}": value for key, value in changes.items()},
        }
        form = AgentRegistrationForm(data, tenant=tenant)
        assert not form.is_valid()
        for key in changes:
            messages = form.errors[f"cfg__{slug}__{key}"]
            assert all(plain(m) for m in messages), messages
            assert messages[0].startswith(label_of(key)), messages


@pytest.mark.django_db
def test_the_admin_form_and_the_command_say_config_errors_plainly(make_tenant):
    tenant = make_tenant()
    skills = [{"id": "s", "name": "S", "description": "d", "tags": [1]}]
    form = AgentForm(
        agent_form(
            tenant,
            executor_kind="echo",
            executor_config=json.dumps({"delay_seconds": -1, "delay": 2}),
            skills=json.dumps(skills),
            default_output_modes='["plain"]',
        )
    )
    assert not form.is_valid()
    assert form.errors["executor_config"] == [
        "delay_seconds must be greater than or equal to 0.",
        "delay is not a known field; the fields are input_required, delay_seconds.",
    ]
    assert form.errors["skills"] == ["Skill #1: tags #1 must be text."]
    assert form.errors["default_output_modes"] == [
        "Media type #1: 'plain' is not a media type such as text/plain."
    ]
    with pytest.raises(CommandError) as excinfo:
        call_command(
            "create_agent",
            tenant.slug,
            "cmd",
            "--kind",
            "echo",
            "--config",
            '{"delay_seconds": "x"}',
        )
    assert str(excinfo.value) == "executor_config: delay_seconds must be a number."
