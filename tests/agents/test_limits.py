"""The bounds on what is sent about a tenant or an agent (agents.limits): at its limit a value
is taken, one more is refused with the field named, on every path (the services, the commands,
the forms of the console and the admin), before anything is written; and the largest card the
bounds allow."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agents import limits
from agents.executors import REGISTRY
from agents.models import Agent, ApiKey, Tenant
from agents.services import agent_create, agent_update, api_key_create, tenant_create

URL = "https://example.com/"


def url_of(length: int) -> str:
    return URL + "a" * (length - len(URL))


def skill(number: int, **fields: Any) -> dict[str, Any]:
    return {
        "id": f"s{number}",
        "name": f"Skill {number}",
        "description": "Does a thing.",
        "tags": ["demo"],
        **fields,
    }


def refused(excinfo: pytest.ExceptionInfo[ValidationError]) -> dict[str, str]:
    """Each refused field with its messages joined."""
    return {field: " ".join(messages) for field, messages in excinfo.value.message_dict.items()}


def base(tenant: Tenant, **fields: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "slug": "bounded",
        "name": "Bounded",
        "description": "d",
        "executor_kind": "echo",
        **fields,
    }


# --- an agent's own fields -------------------------------------------------------------------

AT_THE_LIMIT = {
    "name": "n" * limits.AGENT_NAME,
    "description": "d" * limits.AGENT_DESCRIPTION,
    "version": "v" * limits.AGENT_VERSION,
    "documentation_url": url_of(limits.URL),
    "icon_url": url_of(limits.URL),
    "provider_url": url_of(limits.URL),
    "provider_organization": "o" * limits.PROVIDER_ORGANIZATION,
}


def test_every_field_at_its_limit_is_taken(make_tenant):
    agent = agent_create(**base(make_tenant(), **AT_THE_LIMIT))
    agent.refresh_from_db()
    for field, value in AT_THE_LIMIT.items():
        assert getattr(agent, field) == value, field


@pytest.mark.parametrize("field", sorted(AT_THE_LIMIT))
def test_one_character_more_is_refused_naming_the_field(make_tenant, field):
    value = AT_THE_LIMIT[field]
    value = value + "a" if field.endswith("url") else value + value[-1]
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), **{field: value}))
    assert list(refused(excinfo)) == [field]
    assert f"at most {len(value) - 1} characters (it has {len(value)})" in refused(excinfo)[field]
    assert not Agent.objects.exists()


def test_all_the_problems_of_a_registration_are_said_at_once(make_tenant):
    with pytest.raises(ValidationError) as excinfo:
        agent_create(
            **base(
                make_tenant(),
                description="d" * (limits.AGENT_DESCRIPTION + 1),
                executor_config={"delay_seconds": -1},
                skills=[skill(n) for n in range(limits.SKILLS + 1)],
            )
        )
    assert set(refused(excinfo)) == {"description", "executor_config", "skills"}


def test_an_update_is_checked_within_the_same_bounds_and_writes_nothing(make_tenant, make_agent):
    # given a registered agent
    agent = make_agent(make_tenant(), "edited")
    # when a change over a bound is saved through the service the console's edit uses
    agent.description = "d" * (limits.AGENT_DESCRIPTION + 1)
    agent.skills = [skill(1, tags=["t" * (limits.SKILL_TAG + 1)])]
    with pytest.raises(ValidationError) as excinfo:
        agent_update(agent=agent, fields=["description", "skills"])
    # then both are refused, and the stored agent is as it was
    assert set(refused(excinfo)) == {"description", "skills"}
    assert "Skill #1: tags #1 must be at most 50 characters long" in refused(excinfo)["skills"]
    stored = Agent.objects.get(pk=agent.pk)
    assert stored.description == "The edited agent." and stored.skills == []
    # and within the bounds the same change is saved
    agent.description, agent.skills = "d" * limits.AGENT_DESCRIPTION, [skill(1)]
    agent_update(agent=agent, fields=["description", "skills"])
    assert Agent.objects.get(pk=agent.pk).description == agent.description


def test_the_custom_domain_is_a_host_name_of_at_most_253_characters(make_tenant):
    label = "a" * 63
    longest = ".".join([label, label, label, "b" * 57, "com"])  # 253
    assert len(longest) == 253
    agent_create(**base(make_tenant(), custom_domain=longest))
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), custom_domain="c" + longest))
    assert list(refused(excinfo)) == ["custom_domain"]


# --- skills and media types ------------------------------------------------------------------


def test_skills_at_every_limit_are_taken(make_tenant):
    full = skill(
        1,
        id="i" * limits.SKILL_ID,
        name="n" * limits.SKILL_NAME,
        description="d" * limits.SKILL_DESCRIPTION,
        tags=["t" * limits.SKILL_TAG] * limits.SKILL_TAGS,
        examples=["e" * limits.SKILL_EXAMPLE] * limits.SKILL_EXAMPLES,
        inputModes=["text/" + "p" * (limits.MODE - 5)] * limits.MODES,
        output_modes=["text/plain"] * limits.MODES,
        securityRequirements=[{"schemes": {"apiKey": {"list": ["s" * limits.SKILL_SCOPE]}}}]
        * limits.SKILL_SECURITY_REQUIREMENTS,
    )
    many = [skill(n) for n in range(2, limits.SKILLS + 1)]
    agent = agent_create(**base(make_tenant(), skills=[full, *many], extended_skills=many))
    assert len(agent.skills) == limits.SKILLS


@pytest.mark.parametrize(
    "skills, message",
    [
        (
            [skill(n) for n in range(limits.SKILLS + 1)],
            "At most 20 skills per list (this one has 21).",
        ),
        (
            [skill(1, id="i" * 101)],
            "Skill #1: id must be at most 100 characters long (it has 101).",
        ),
        ([skill(1, name="")], "Skill #1: name must not be empty."),
        ([skill(1, description="d" * 1001)], "Skill #1: description must be at most 1,000"),
        ([skill(1, tags=["t"] * 11)], "Skill #1: tags must have at most 10 items (it has 11)."),
        ([skill(1, tags=["t" * 51])], "Skill #1: tags #1 must be at most 50 characters long"),
        ([skill(1, examples=["e"] * 6)], "Skill #1: examples must have at most 5 items"),
        ([skill(1), skill(2, examples=["e" * 501])], "Skill #2: examples #1 must be at most 500"),
        ([skill(1, inputModes=["text"])], "Skill #1: inputModes #1: 'text' is not a media type"),
        ([skill(1, output_modes=["a/b"] * 11)], "Skill #1: output_modes must have at most 10"),
        ([skill(1, tags="t")], "Skill #1: tags must be a list."),
        ([skill(1, tags=[5])], "Skill #1: tags #1 must be text."),
        ([skill(1, colour="red")], "Skill #1: colour is not a known field; the fields are id,"),
        (
            [skill(1, securityRequirements=[{"schemes": {}}] * 5)],
            "Skill #1: securityRequirements must have at most 4 items",
        ),
        (
            [skill(1, securityRequirements=[{"schemes": {"apiKey": {"list": ["s" * 65]}}}])],
            "Skill #1: securityRequirements #1.schemes.apiKey.list #1 must be at most 64",
        ),
        ([skill(1), skill(1)], "Skill #2: the id 's1' is used by an earlier skill."),
        (["s1"], "Skill #1 must be a JSON object."),
        ({"id": "s1"}, "Skills must be a JSON list of AgentSkill objects."),
    ],
)
@pytest.mark.parametrize("field", ["skills", "extended_skills"])
def test_skills_over_a_limit_are_refused_naming_the_skill_and_the_rule(
    make_tenant, field, skills, message
):
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), **{field: skills}))
    assert list(refused(excinfo)) == [field]
    assert message in refused(excinfo)[field]


def test_skills_within_every_field_limit_are_bounded_together(make_tenant):
    # 20 skills, each field within its own limit, together over the JSON bound of the list
    skills = [
        skill(n, description="d" * limits.SKILL_DESCRIPTION, examples=["e" * 500] * 5)
        for n in range(limits.SKILLS)
    ]
    size = len(json.dumps(skills, separators=(",", ":")))
    assert size > limits.SKILLS_JSON
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), skills=skills))
    assert refused(excinfo)["skills"] == (
        f"The skills are {size:,} characters long as JSON; at most 64,000 together (shorten "
        "descriptions or examples)."
    )


@pytest.mark.parametrize(
    "modes, message",
    [
        (["text/plain"] * 11, "The list must have at most 10 items (it has 11)."),
        (["text/" + "p" * 123], "Media type #1 must be at most 127 characters long (it has 128)."),
        (["text/plain", "plain"], "Media type #2: 'plain' is not a media type such as text/plain."),
        ([" text/plain"], "Media type #1: ' text/plain' is not a media type"),
        ([7], "Media type #1 must be text."),
        ("text/plain", 'Give a JSON list of media types, e.g. ["text/plain"].'),
    ],
)
def test_media_types_over_a_limit_are_refused(make_tenant, modes, message):
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), default_output_modes=modes))
    assert message in refused(excinfo)["default_output_modes"]
    agent_create(**base(make_tenant(), default_output_modes=["text/" + "p" * 122] * 10))


# --- executor configs --------------------------------------------------------------------------


def test_every_kinds_urls_are_bounded_as_the_cards_are():
    for kind in REGISTRY.values():
        for key, info in kind.config_model.model_fields.items():
            if "url" in key.split("_"):
                bounds = [getattr(m, "max_length", None) for m in info.metadata]
                assert limits.URL in bounds, (kind.name, key)


def test_every_text_of_every_kinds_config_is_bounded():
    for kind in REGISTRY.values():
        for key, info in kind.config_model.model_fields.items():
            if info.annotation is str:
                assert any(getattr(m, "max_length", None) for m in info.metadata), (kind, key)


def test_a_config_is_bounded_as_a_whole_and_in_depth(make_tenant, settings):
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.GreetingExecutor"]
    path = "tests.agents.sample_executors.GreetingExecutor"
    tenant = make_tenant()
    kwargs = {"greeting": "g" * (limits.EXECUTOR_CONFIG_JSON - 100)}
    agent_create(
        **base(tenant, slug="largest", executor_kind="python"),
        executor_config={"class_path": path, "init_kwargs": kwargs},
    )
    kwargs = {"greeting": "g" * limits.EXECUTOR_CONFIG_JSON}
    with pytest.raises(ValidationError) as excinfo:
        agent_create(
            **base(tenant, executor_kind="python"),
            executor_config={"class_path": path, "init_kwargs": kwargs},
        )
    assert (
        "characters long as JSON; at most 128,000 are kept." in refused(excinfo)["executor_config"]
    )
    deep: Any = "hello"
    for _ in range(limits.JSON_DEPTH):
        deep = [deep]
    with pytest.raises(ValidationError) as excinfo:
        agent_create(
            **base(tenant, executor_kind="python"),
            executor_config={"class_path": path, "init_kwargs": {"greeting": deep}},
        )
    assert "nested more than 20 levels deep" in refused(excinfo)["executor_config"]
    with pytest.raises(ValidationError) as excinfo:
        agent_create(
            **base(tenant, executor_kind="python"),
            executor_config={"class_path": path, "init_kwargs": {"greeting": float("inf")}},
        )
    assert "JSON values only" in refused(excinfo)["executor_config"]


def test_init_kwargs_are_bounded_in_number_and_name(make_tenant, settings):
    settings.A2A_PYTHON_EXECUTORS = ["tests.agents.sample_executors.OptionsExecutor"]
    config = {"class_path": "tests.agents.sample_executors.OptionsExecutor"}
    tenant = make_tenant()
    many = {f"k{n}": n for n in range(limits.INIT_KWARGS + 1)}
    for init_kwargs, message in (
        (many, "init_kwargs must have at most 50 items (it has 51)."),
        ({"k" * 65: 1}, "is longer than 64 characters"),
        ({"not a name": 1}, "init_kwargs: 'not a name' is not a Python keyword argument name."),
        ({"class": 1}, "init_kwargs: 'class' is not a Python keyword argument name."),
    ):
        with pytest.raises(ValidationError) as excinfo:
            agent_create(
                **base(tenant, executor_kind="python"),
                executor_config={**config, "init_kwargs": init_kwargs},
            )
        assert message in refused(excinfo)["executor_config"], init_kwargs
    many.pop("k0")
    agent_create(
        **base(tenant, executor_kind="python"), executor_config={**config, "init_kwargs": many}
    )


# --- tenants and keys ------------------------------------------------------------------------


def test_a_tenant_name_is_bounded_by_the_service_and_the_command(db, capsys):
    tenant_create(slug="named", name="n" * limits.TENANT_NAME)
    with pytest.raises(ValidationError) as excinfo:
        tenant_create(slug="too-long", name="n" * (limits.TENANT_NAME + 1))
    assert list(refused(excinfo)) == ["name"]
    with pytest.raises(CommandError, match=r"name: Ensure this value has at most 200 characters"):
        call_command("create_tenant", "too-long", "--name", "n" * 201)
    assert not Tenant.objects.filter(slug="too-long").exists()


@pytest.mark.parametrize("field", ["name", "principal"])
def test_an_api_key_name_and_principal_are_bounded_by_the_service_and_the_command(
    make_tenant, field
):
    tenant = make_tenant()
    api_key_create(tenant=tenant, **{"name": "k", field: "p" * 200})
    with pytest.raises(ValidationError) as excinfo:
        api_key_create(tenant=tenant, **{"name": "k", field: "p" * 201})
    assert field in refused(excinfo)  # a name is the principal too when none is given
    option = [] if field == "name" else ["--principal", "p" * 201]
    name = "p" * 201 if field == "name" else "k"
    with pytest.raises(CommandError, match=rf"{field}: Ensure this value has at most 200"):
        call_command("create_api_key", tenant.slug, name, *option)
    assert ApiKey.objects.filter(tenant=tenant).count() == 1


def test_create_agent_refuses_what_is_over_a_limit_naming_it(make_tenant, capsys):
    tenant = make_tenant()
    with pytest.raises(CommandError) as excinfo:
        call_command(
            "create_agent",
            tenant.slug,
            "bot",
            "--kind",
            "echo",
            "--description",
            "d" * (limits.AGENT_DESCRIPTION + 1),
            "--skills",
            json.dumps([skill(1, tags=["t"] * 11)]),
        )
    message = str(excinfo.value)
    assert "description: Ensure this value has at most 4000 characters (it has 4001)." in message
    assert "skills: Skill #1: tags must have at most 10 items (it has 11)." in message
    with pytest.raises(CommandError, match="--config must be JSON: it is nested too deeply."):
        call_command(
            "create_agent", tenant.slug, "bot", "--kind", "echo", "--config", "[" * 100_000
        )
    assert not Agent.objects.filter(tenant=tenant).exists()


# --- the card --------------------------------------------------------------------------------


def largest_skills() -> list[dict[str, Any]]:
    """SKILLS skills, each field at its limit but the examples, which fill the list up to its
    JSON bound."""
    skills = [
        skill(
            n,
            id=f"{n:02}" + "i" * (limits.SKILL_ID - 2),
            name="n" * limits.SKILL_NAME,
            description="d" * limits.SKILL_DESCRIPTION,
            tags=["t" * limits.SKILL_TAG] * limits.SKILL_TAGS,
            inputModes=["text/plain"],
            outputModes=["text/plain"],
            examples=[],
        )
        for n in range(limits.SKILLS)
    ]
    room = (limits.SKILLS_JSON - len(json.dumps(skills, separators=(",", ":")))) // limits.SKILLS
    for item in skills:  # three examples: '"…",' each
        item["examples"] = ["e" * min(limits.SKILL_EXAMPLE, room // 3 - 3)] * 3
    assert len(json.dumps(skills, separators=(",", ":"))) <= limits.SKILLS_JSON
    return skills


def test_the_largest_card_the_bounds_allow_is_under_96_kb(make_tenant, client, settings):
    # given an agent with every field of its card at its limit, and the longest slugs
    settings.A2A_PUBLIC_BASE_URL = "https://agents.example.com"
    settings.A2A_GRPC_PUBLIC_ADDRESS = "grpc.agents.example.com:443"
    tenant = make_tenant("t" * 63)
    skills = largest_skills()
    agent_create(
        **base(tenant, slug="a" * 63, **AT_THE_LIMIT),
        default_input_modes=["text/" + "p" * (limits.MODE - 5)] * limits.MODES,
        default_output_modes=["text/" + "p" * (limits.MODE - 5)] * limits.MODES,
        skills=skills,
        extended_skills=skills,
        visibility="public",
    )
    # when its card is fetched as clients fetch it (v1.0 with v0.3 merged in, and v1.0 alone)
    url = f"/a2a/{'t' * 63}/{'a' * 63}/.well-known/agent-card.json"
    sizes = [len(client.get(url).content), len(client.get(url, HTTP_A2A_VERSION="1.0").content)]
    # then it is under 96 KB, most of it the skills (docs/configuration.md, "Limits")
    assert all(limits.SKILLS_JSON < size < 96_000 for size in sizes), sizes


@pytest.mark.parametrize(
    "field, value",
    [
        ("skills", [skill(1, description="nul \x00 here")]),
        ("extended_skills", [skill(1, tags=["\ud800"])]),
        ("default_input_modes", ["text/\x00plain"]),
        ("executor_config", {"delay_seconds": 1, "\x00": 2}),
    ],
)
def test_text_the_database_cannot_keep_is_refused_not_failed_on(make_tenant, field, value):
    with pytest.raises(ValidationError) as excinfo:
        agent_create(**base(make_tenant(), **{field: value}))
    message = refused(excinfo)[field]
    assert message in (
        "Text here must not contain U+0000 (NUL).",
        "Text here must be Unicode text: U+D800 is a lone UTF-16 surrogate.",
    )
    assert not Agent.objects.exists()
