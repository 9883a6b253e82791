"""Agents and API keys are cached per process (agents.cache); a change made in another process
(this one: the console, the admin, a queryset update, a service) reaches the running daphne and
gRPC sidecar within A2A_AUTH_CACHE_SECONDS.

Each test makes the servers read (and cache) the rows first, changes them here, lets the bound
pass, and then expects the change to hold. That is not a measurement: an entry is used only
until the bound after its read, which came before the change, so once the bound has passed
since the change no process may still use the old row, however slow it is."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import grpc
import pytest
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from django.conf import settings
from django.urls import reverse

from agents.models import Agent, ApiKey, Membership, Tenant
from agents.services import api_key_create

from .helpers import raw_send

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def after_the_bound() -> None:
    time.sleep(settings.A2A_AUTH_CACHE_SECONDS + 0.25)


@pytest.fixture
def target(live_platform, make_tenant, make_agent):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    key, secret = api_key_create(tenant=tenant, name="alice", principal="alice")
    return agent, key, secret


def jsonrpc(http, live_platform, agent: Agent, secret: str) -> int:
    """Send one blocking SendMessage over HTTP; the HTTP status."""
    response = http.post(
        live_platform.agent_url(agent),
        json=raw_send("hi"),
        headers={"X-API-Key": secret, "A2A-Version": "1.0"},
    )
    return response.status_code


def over_grpc(live_platform, agent: Agent, secret: str) -> grpc.StatusCode:
    """List the caller's tasks over the sidecar; the gRPC status."""
    request = pb10.ListTasksRequest(tenant=f"{agent.tenant.slug}/{agent.slug}")
    with grpc.insecure_channel(live_platform.grpc_address) as channel:
        try:
            pb10_grpc.A2AServiceStub(channel).ListTasks(
                request, metadata=[("x-api-key", secret)], timeout=30
            )
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def both_serve(http, live_platform, agent: Agent, secret: str) -> None:
    # Twice each: the second call is served from the cache the first one filled.
    for _ in range(2):
        assert jsonrpc(http, live_platform, agent, secret) == 200
        assert over_grpc(live_platform, agent, secret) == grpc.StatusCode.OK


def test_a_key_revoked_in_the_console_stops_working_in_daphne_and_the_sidecar(
    http, live_platform, target, client, django_user_model
):
    agent, key, secret = target
    owner = django_user_model.objects.create_user(f"owner-{uuid.uuid4()}", password="pw")
    Membership.objects.create(user=owner, tenant=agent.tenant, role=Membership.Role.OWNER)
    both_serve(http, live_platform, agent, secret)
    # when the owner revokes the key in the console (served by this process, not daphne)
    client.force_login(owner)
    revoke = reverse(
        "console:key-revoke",
        kwargs={"tenant_slug": agent.tenant.slug, "agent_slug": agent.slug, "prefix": key.prefix},
    )
    assert client.post(revoke).status_code == 302
    assert ApiKey.objects.get(pk=key.pk).revoked_at is not None
    after_the_bound()
    assert jsonrpc(http, live_platform, agent, secret) == 401
    assert over_grpc(live_platform, agent, secret) == grpc.StatusCode.UNAUTHENTICATED


def test_a_key_deleted_in_the_admin_stops_working(
    http, live_platform, target, client, django_user_model
):
    agent, key, secret = target
    operator = django_user_model.objects.create_superuser(f"op-{uuid.uuid4()}", password="pw")
    both_serve(http, live_platform, agent, secret)
    client.force_login(operator)
    deleted = client.post(
        reverse("admin:agents_apikey_changelist"),
        {"action": "delete_selected", "_selected_action": [key.pk], "post": "yes"},
    )
    assert deleted.status_code == 302 and not ApiKey.objects.filter(pk=key.pk).exists()
    after_the_bound()
    assert jsonrpc(http, live_platform, agent, secret) == 401
    assert over_grpc(live_platform, agent, secret) == grpc.StatusCode.UNAUTHENTICATED


def _deactivate_agent(agent: Agent) -> None:
    Agent.objects.filter(pk=agent.pk).update(is_active=False)  # no save(), no signal


def _deactivate_tenant(agent: Agent) -> None:
    tenant = Tenant.objects.get(pk=agent.tenant_id)
    tenant.is_active = False
    tenant.save()


@pytest.mark.parametrize("deactivate", [_deactivate_agent, _deactivate_tenant])
def test_a_deactivated_agent_or_tenant_is_gone_everywhere(
    http, live_platform, target, deactivate: Callable[[Agent], None]
):
    agent, _, secret = target
    both_serve(http, live_platform, agent, secret)
    deactivate(agent)
    after_the_bound()
    assert jsonrpc(http, live_platform, agent, secret) == 404
    assert over_grpc(live_platform, agent, secret) == grpc.StatusCode.NOT_FOUND


def test_a_new_key_works_at_once_and_its_use_is_recorded(http, live_platform, target):
    agent, _, secret = target
    assert jsonrpc(http, live_platform, agent, secret) == 200  # the agent is cached now
    fresh, fresh_secret = api_key_create(tenant=agent.tenant, name="bob")
    assert (
        jsonrpc(http, live_platform, agent, fresh_secret) == 200
    )  # no wait: misses are not cached
    assert ApiKey.objects.get(pk=fresh.pk).last_used_at is not None
