"""Registering tenants, agents and keys: services, management commands and the admin."""

from __future__ import annotations

import logging

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from agents.auth import key_prefix
from agents.cards import agent_card_json
from agents.executors.secrets import executor_secret_names, executor_secrets_open
from agents.models import Agent, ApiKey, Membership, Tenant
from agents.services import agent_create


def test_agent_create_validates_config_skills_and_modes(make_tenant):
    tenant = make_tenant()
    base = dict(tenant=tenant, slug="a", name="A", description="d", executor_kind="echo")
    with pytest.raises(ValidationError, match="delay_seconds"):
        agent_create(**base, executor_config={"delay_seconds": -1})
    with pytest.raises(ValidationError, match="Unknown executor kind"):
        agent_create(**{**base, "executor_kind": "nope"})
    with pytest.raises(ValidationError, match="Skill #1: name is required"):
        agent_create(**base, skills=[{"id": "x"}])
    with pytest.raises(ValidationError, match="is not a media type such as text/plain"):
        agent_create(**base, default_input_modes=["text"])
    with pytest.raises(ValidationError, match="slug"):
        agent_create(**{**base, "slug": "Bad Slug"})
    assert not Agent.objects.exists()


def test_card_declares_interfaces_security_and_extended_skills(make_tenant, make_agent, settings):
    settings.A2A_PUBLIC_BASE_URL = "https://agents.example.com"
    agent = make_agent(
        make_tenant("acme"),
        "helper",
        skills=[{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
        extended_skills=[{"id": "x", "name": "X", "description": "d", "tags": ["x"]}],
    )
    card = agent_card_json(agent)
    url = "https://agents.example.com/a2a/acme/helper/"
    interfaces = card["supportedInterfaces"]
    assert [(i["url"], i["protocolBinding"], i["protocolVersion"]) for i in interfaces] == [
        (url, "JSONRPC", "1.0"),
        (url.rstrip("/"), "HTTP+JSON", "1.0"),
        (url, "JSONRPC", "0.3"),
        (url.rstrip("/"), "HTTP+JSON", "0.3"),
    ]
    assert card["url"] == url and card["preferredTransport"] == "JSONRPC"
    assert card["protocolVersion"] == "0.3"
    assert set(card["securitySchemes"]) == {"apiKey", "bearer"}
    assert {} not in card["securityRequirements"]  # private: no anonymous option
    assert [s["id"] for s in card["skills"]] == ["s"]
    assert [s["id"] for s in agent_card_json(agent, extended=True)["skills"]] == ["s", "x"]
    agent.visibility = Agent.Visibility.PUBLIC
    assert {} in agent_card_json(agent)["securityRequirements"]


def test_an_agent_without_skills_has_a_card_that_lists_one(make_tenant, make_agent, caplog):
    agent = make_agent(make_tenant("acme"), "plain")
    assert agent.skills == []
    with caplog.at_level(logging.WARNING):
        for strict in (False, True):
            card = agent_card_json(agent, strict=strict)
            [skill] = card["skills"]
            assert skill == {
                "id": "plain",
                "name": "Plain",
                "description": "The plain agent.",
                "tags": ["echo"],
            }
    # The SDK checks every REQUIRED field of a card it serializes, and says so when one is
    # missing or empty (an empty `skills` was).
    assert not [r for r in caplog.records if "spec-compliant" in r.getMessage()]


@pytest.mark.parametrize(
    ("versions", "listed", "strict"),
    [
        ("1.0", {"1.0"}, True),  # whatever the request asks: no v0.3 interface to merge in
        ("1.0,0.1", {"1.0"}, True),
        ("0.3", {"0.3"}, False),  # whatever the request asks: v0.3 clients' card
        ("0.3,0.1", {"0.3"}, False),
        ("0.1", {"0.1"}, True),  # its JSON-RPC URL, the one interface it has
    ],
)
def test_the_card_lists_only_the_versions_served(
    make_tenant, make_agent, settings, versions, listed, strict
):
    settings.A2A_GRPC_PUBLIC_ADDRESS = "grpc.example.com:443"
    agent = make_agent(make_tenant(), "some", protocol_versions=versions)
    for asked_v10 in (False, True):
        card = agent_card_json(agent, strict=asked_v10)
        assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == listed
        assert ("url" not in card) is strict, card
    bindings = sorted(i["protocolBinding"] for i in agent_card_json(agent)["supportedInterfaces"])
    # v0.3's GRPC interface is written twice: a `host:port` target, then the same as a URL.
    grpc = {"0.1": [], "0.3": ["GRPC", "GRPC"]}.get(sorted(listed)[0], ["GRPC"])
    http = [] if listed == {"0.1"} else ["HTTP+JSON"]
    assert bindings == [*grpc, *http, "JSONRPC"]


def test_create_agent_sets_the_versions_served_and_de_duplication(make_tenant, capsys):
    tenant = make_tenant()
    base = ["create_agent", tenant.slug]
    call_command(*base, "modern", "--kind", "echo", "--versions", "0.3, 1.0", "--no-deduplicate")
    agent = Agent.objects.get(tenant=tenant, slug="modern")
    assert (agent.protocol_versions, agent.deduplicate_messages) == ("1.0,0.3", False)
    assert "serves A2A 1.0, 0.3 only" in capsys.readouterr().out
    call_command(*base, "every", "--kind", "echo")
    agent = Agent.objects.get(tenant=tenant, slug="every")
    assert (agent.protocol_versions, agent.deduplicate_messages) == ("1.0,0.3,0.1", True)
    for versions, problem in (
        ("1.0,2.0", "--versions: Not an A2A version the platform speaks: 2.0"),
        (",", "--versions: An agent serves at least one A2A version."),
    ):
        with pytest.raises(CommandError, match=problem):
            call_command(*base, "refused", "--kind", "echo", "--versions", versions)
    assert not Agent.objects.filter(slug="refused").exists()


def test_management_commands_register_everything(db, capsys):
    call_command("create_tenant", "acme", "--name", "Acme")
    call_command(
        "create_agent",
        "acme",
        "bot",
        "--kind",
        "echo",
        "--config",
        '{"delay_seconds": 0.5}',
        "--public",
    )
    call_command("create_api_key", "acme", "ops", "--admin", "--agent", "bot")
    out = capsys.readouterr().out
    assert "a2a/acme/bot/.well-known/agent-card.json" in out
    secret = out.split("api key: ")[1].split()[0]
    key = ApiKey.objects.get(tenant__slug="acme")
    assert (
        key.is_tenant_admin and key.agent.slug == "bot" and secret.startswith(f"a2a_{key.prefix}_")
    )
    assert Agent.objects.get(slug="bot").executor_config == {
        "delay_seconds": 0.5,
        "input_required": False,
    }
    with pytest.raises(CommandError, match="No tenant"):
        call_command("create_agent", "nobody", "bot", "--kind", "echo")
    with pytest.raises(CommandError, match="delay_seconds"):
        call_command(
            "create_agent",
            "acme",
            "bot2",
            "--kind",
            "echo",
            "--config",
            '{"delay_seconds": "slow"}',
        )


def test_seed_demo_is_idempotent_and_prints_urls_and_a_working_key(
    db, capsys, settings, monkeypatch
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # as `make run` sets it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    call_command("seed_demo")
    call_command("seed_demo")
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("agent card (demo/echo): http") for line in lines) == 2
    assert sum(line.startswith("agent card (demo/conformance): http") for line in lines) == 2
    assert sum(line.startswith("agent card (demo/echo-proxy): http") for line in lines) == 2
    assert sum(line.startswith("API key (demo): a2a_") for line in lines) == 2
    # Without an endpoint in the environment, one line says how to add the openai agent.
    enable = "demo/assistant (an openai agent): set OPENAI_API_KEY (and OPENAI_BASE_URL"
    assert sum(line.startswith(enable) for line in lines) == 2
    assert Tenant.objects.count() == 1 and Agent.objects.count() == 3
    # The demo's key and the proxy's own key for echo: the first run's, kept. (The var dir of
    # this profile holds no key of its own, so the second run names the demo key by its prefix:
    # tests/e2e/test_demo_agents.py has the var dir that keeps its secret.)
    live = ApiKey.objects.filter(revoked_at__isnull=True)
    assert sorted(live.values_list("name", flat=True)) == ["demo", "echo-proxy"]
    demo_keys = [line.split(": ", 1)[1] for line in lines if line.startswith("API key (demo): ")]
    assert live.get(name="demo").prefix == key_prefix(demo_keys[0])
    assert demo_keys[1].startswith(f"a2a_{key_prefix(demo_keys[0])}_... (kept; issued ")
    assert ApiKey.objects.filter(name="echo-proxy").count() == 1
    proxy = Agent.objects.get(slug="echo-proxy")
    echo = Agent.objects.get(slug="echo")
    assert live.get(name="echo-proxy").agent == echo
    assert proxy.executor_kind == "a2a-proxy"
    assert proxy.executor_config["card_url"].endswith("/a2a/demo/echo/.well-known/agent-card.json")
    assert executor_secret_names(proxy.executor_secrets_encrypted) == ["api_key"]
    conformance = Agent.objects.get(slug="conformance")
    assert conformance.is_public and conformance.anonymous_scope == "shared"
    # Console logins: an operator and an owner of the demo tenant, with the latest passwords.
    logins = [line.split(": ", 1)[1].split(" / ") for line in lines if "console login" in line]
    assert [user for user, _ in logins] == ["operator", "demo-owner"] * 2
    operator, owner = (authenticate(username=u, password=p) for u, p in logins[2:])
    assert operator.is_staff and not owner.is_staff
    assert authenticate(username="operator", password=logins[0][1]) is None  # replaced
    assert Membership.objects.get(user=owner).role == "owner"


def test_admin_validates_executor_config_and_shows_a_new_key_once(client, make_tenant):
    tenant = make_tenant()
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    index = client.get("/admin/").content.decode()
    assert "Deliveries" in index and "Deliverys" not in index
    form = {
        "tenant": tenant.pk,
        "slug": "bot",
        "name": "Bot",
        "description": "d",
        "version": "1.0.0",
        "executor_kind": "echo",
        "executor_config": '{"delay_seconds": "slow"}',
        "skills": "[]",
        "extended_skills": "[]",
        "default_input_modes": "[]",
        "default_output_modes": "[]",
        "visibility": "private",
        "anonymous_scope": "isolated",
        "worker_loss": "fail",
        "worker_loss_attempts": "3",
        "is_active": "on",
        "protocol_versions": ["1.0", "0.3", "0.1"],
    }
    response = client.post("/admin/agents/agent/add/", form)
    assert response.status_code == 200 and b"delay_seconds" in response.content
    assert not Agent.objects.exists()
    response = client.post("/admin/agents/agent/add/", {**form, "executor_config": "{}"})
    assert response.status_code == 302, response.content[:2000]
    assert Agent.objects.get(slug="bot").executor_config == {
        "input_required": False,
        "delay_seconds": 0.0,
    }
    response = client.post(
        "/admin/agents/apikey/add/",
        {"tenant": tenant.pk, "name": "ops", "principal": "", "scopes": "[]"},
        follow=True,
    )
    key = ApiKey.objects.get(name="ops")
    shown = [str(m) for m in response.context["messages"]]
    assert any(f"a2a_{key.prefix}_" in m for m in shown)
    assert key.principal == "ops" and len(key.secret_hash) == 64


def test_seed_demo_adds_an_openai_agent_from_the_environment(db, capsys, settings, monkeypatch):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-demo")
    call_command("seed_demo")
    assistant = Agent.objects.get(slug="assistant")
    assert assistant.executor_kind == "openai"
    assert assistant.executor_config["base_url"] == "http://127.0.0.1:9/v1"
    assert assistant.executor_config["model"] == "gpt-4o-mini"
    assert executor_secrets_open(assistant.executor_secrets_encrypted) == {"api_key": "sk-demo"}
    # Run again with another model and no key: the same agent (its tasks stay), changed.
    monkeypatch.setenv("OPENAI_MODEL", "local-model")
    monkeypatch.delenv("OPENAI_API_KEY")
    call_command("seed_demo")
    again = Agent.objects.get(slug="assistant")
    assert again.pk == assistant.pk and again.executor_config["model"] == "local-model"
    assert again.executor_secrets_encrypted == ""
    assert "agent card (demo/assistant): http" in capsys.readouterr().out


def test_seed_demo_says_why_the_proxy_is_missing_when_the_guard_refuses_it(db, capsys, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = []
    call_command("seed_demo")
    out = capsys.readouterr().out
    assert "demo/echo-proxy not created: executor_config: card_url: " in out
    assert "loopback" in out and "A2A_AGENT_ALLOWED_NETWORKS" in out
    assert not Agent.objects.filter(slug="echo-proxy").exists()
