"""seed_demo's conformance agent, which the A2A TCK is run against, does not de-duplicate
messageIds (docs/conformance.md), also when the agent was made before it had the setting."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from agents.models import Agent


@pytest.fixture
def demo(db, settings, monkeypatch):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # as `make run` sets it
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_the_conformance_agent_does_not_deduplicate_and_echo_does(demo):
    call_command("seed_demo")
    assert not Agent.objects.get(slug="conformance").deduplicate_messages
    assert Agent.objects.get(slug="echo").deduplicate_messages


def test_a_run_on_an_existing_database_turns_it_off_again(demo):
    call_command("seed_demo")
    # As a database migrated from before the setting has it: on (the column's default).
    Agent.objects.filter(slug__in=["conformance", "echo"]).update(deduplicate_messages=True)
    call_command("seed_demo")
    assert not Agent.objects.get(slug="conformance").deduplicate_messages
    assert Agent.objects.get(slug="echo").deduplicate_messages  # the operator's to choose
