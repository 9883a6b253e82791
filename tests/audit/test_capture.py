"""What the audit log records of the changes made in the console, the admin and management
commands: who (the person, the command, the platform), from where, what changed (before and
after), and never a secret: not a key's secret or its digest, not an executor secret, not a
password, not a private key. An A2A call records nothing."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.core.serializers.json import DjangoJSONEncoder
from django.test import AsyncClient
from django.urls import reverse
from django.utils import timezone

from agents.crypto import decrypt
from agents.models import Agent, ApiKey, Membership, SigningKey
from agents.services import agent_secrets_set, signing_key_retire, signing_key_rotate
from audit.context import Actor, acting_as
from audit.models import AUTH_FAILURE, CHANGED, MASK, AuditEvent
from push_app.models import Delivery, PushConfig
from tests.factories import task_create

from ..agents.test_admin_agents import SHOUTING
from ..console.test_agent_kinds import LOCAL, SECRET, new_url, openai_form
from ..console.test_agent_pages import agent_url

pytestmark = pytest.mark.django_db

ADDRESS = "203.0.113.7"  # the client's address, as REMOTE_ADDR (daphne's, behind a proxy)


def events(**filters: Any) -> list[AuditEvent]:
    return list(changes().filter(**filters).order_by("pk"))


def changes() -> Any:
    """The log's changes (not the refused credentials, which this process's thread may add at
    any moment from another test's failed login)."""
    return AuditEvent.objects.exclude(action=AUTH_FAILURE)


def row_text(event: AuditEvent) -> str:
    """The whole stored row, every column, as text: where a secret must not be."""
    return json.dumps(AuditEvent.objects.filter(pk=event.pk).values().get(), cls=DjangoJSONEncoder)


def log_text() -> str:
    return "\n".join(row_text(e) for e in changes())


def owner_client(client, world):
    client.force_login(world["owner_a"])
    client.defaults["REMOTE_ADDR"] = ADDRESS
    return client


# --- the console ----------------------------------------------------------------------------


def test_an_agent_registered_in_the_console_is_recorded_with_its_secret_masked(
    client, world, settings
):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    owner_client(client, world)
    # when an owner registers an openai agent with its key
    response = client.post(
        new_url(world), openai_form(client, new_url(world), secret__openai__api_key=SECRET)
    )
    assert response.status_code == 302
    agent = Agent.objects.get(tenant=world["a"], slug="writer")
    # then one event says who, from where, what was made
    [created] = events(object_type="agent", object_id=str(agent.pk))
    assert (created.tenant_id, created.action) == (world["a"].pk, "create")
    assert (created.actor, created.actor_user, created.source) == (
        "user:owner_a",
        world["owner_a"],
        ADDRESS,
    )
    assert created.object_label == "writer"
    assert created.changes["name"] == [None, "Writer"]
    assert created.changes["executor_kind"] == [None, "openai"]
    assert created.changes["executor_config"][1]["model"] == "small-model"
    # and the key only as "set", by name
    assert created.changes["executor_secrets.api_key"] == [None, MASK]
    assert "executor_secrets_encrypted" not in created.changes
    assert SECRET not in row_text(created)
    assert agent.executor_secrets_encrypted not in row_text(created)


def test_changed_executor_secrets_are_told_apart_by_name_never_by_value(client, world, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    owner_client(client, world)
    client.post(new_url(world), openai_form(client, new_url(world), secret__openai__api_key=SECRET))
    agent = Agent.objects.get(tenant=world["a"], slug="writer")
    edit = agent_url(agent, "console:agent-edit")
    before = changes().count()

    # a typed key replaces the stored one; then the tick removes it
    replaced = "sk-console-replaced-value-77"
    client.post(edit, openai_form(client, edit, secret__openai__api_key=replaced))
    client.post(edit, openai_form(client, edit, secret_remove__openai__api_key="on"))

    made = [e.changes for e in events(pk__gt=0)[before:] if e.object_type == "agent"]
    secret_changes = [c for c in made if any(k.startswith("executor_secrets") for k in c)]
    assert secret_changes == [
        {"executor_secrets.api_key": [MASK, CHANGED]},
        {"executor_secrets.api_key": [MASK, None]},
    ]
    text = log_text()
    assert SECRET not in text and replaced not in text


def test_the_same_secret_typed_again_is_no_change(world, make_agent, settings):
    settings.A2A_PYTHON_EXECUTORS = [SHOUTING]
    agent = make_agent(world["a"], "shouter", kind="python", config={"class_path": SHOUTING})
    with acting_as(Actor("user:someone")):
        agent_secrets_set(agent=agent, secrets={"suffix": "t-1"})
        before = changes().count()
        agent_secrets_set(agent=agent, secrets={"suffix": "t-1"})  # sealed anew: other bytes
    assert changes().count() == before
    [set_once] = events(object_type="agent", action="update")
    assert set_once.changes == {"executor_secrets.suffix": [None, MASK]}


def test_console_keys_created_and_revoked_are_recorded_without_their_secret(client, world):
    owner_client(client, world)
    agent = world["agent_a"]
    client.post(agent_url(agent, "console:key-create"), {"name": "ci-bot", "this_agent_only": "on"})
    page = client.get(agent_url(agent)).content.decode()
    secret = re.search(r'id="new-secret">([^<]+)<', page)[1]
    key = ApiKey.objects.get(name="ci-bot")
    client.post(agent_url(agent, "console:key-revoke", prefix=key.prefix))

    created, revoked = events(object_type="api_key", object_id=str(key.pk))
    assert (created.action, revoked.action) == ("create", "revoke")
    for event in (created, revoked):
        assert (event.actor, event.source, event.tenant_id) == (
            "user:owner_a",
            ADDRESS,
            key.tenant_id,
        )
    assert created.object_label == f"ci-bot ({key.prefix}…)"
    assert created.changes["secret_hash"] == [None, MASK]
    assert created.changes["prefix"] == [None, key.prefix]
    # a foreign key by what it points to, and its id
    assert created.changes["agent"] == [None, f"alpha (#{agent.pk})"]
    assert created.changes["tenant"] == [None, f"{world['a'].slug} (#{world['a'].pk})"]
    assert list(revoked.changes) == ["revoked_at"] and revoked.changes["revoked_at"][0] is None
    text = log_text()
    assert secret not in text and key.secret_hash not in text


def test_people_invited_and_their_role_changed_in_the_console(client, world):
    owner_client(client, world)
    people = reverse("console:people", kwargs={"tenant_slug": world["a"].slug})
    client.post(
        people + "add/", {"username": "newcomer", "email": "new@example.org", "role": "member"}
    )
    membership = Membership.objects.get(user__username="newcomer")
    client.post(people + f"{membership.pk}/role/", {"role": "owner"})

    joined, promoted = events(object_type="membership", object_id=str(membership.pk))
    assert (joined.action, joined.tenant_id, joined.actor) == (
        "create",
        world["a"].pk,
        "user:owner_a",
    )
    assert joined.object_label == "newcomer (member)"
    assert joined.changes["role"] == [None, "member"]
    assert (promoted.action, promoted.changes) == ("update", {"role": ["member", "owner"]})
    assert promoted.object_label == "newcomer (owner)"
    # the account made for them is the platform's record (operators only), password masked
    [account] = events(object_type="user", object_label="newcomer")
    assert account.tenant_id is None and account.action == "create"
    assert account.changes["email"] == [None, "new@example.org"]
    assert account.changes["password"] == [None, MASK]
    password = get_user_model().objects.get(username="newcomer").password
    assert password not in log_text()


def test_a_reply_from_the_console_is_recorded_on_the_task(world):
    """The actions on tasks change no watched model: the console records them itself."""
    from console.services import task_action_record

    task = task_create(world["agent_a"])
    with acting_as(Actor("user:owner_a", world["owner_a"].pk, ADDRESS)):
        task_action_record(
            user=world["owner_a"], task_id=task.pk, action="reply", role="owner",
            message_id="m-1", text="the words themselves",
        )  # fmt: skip
    [event] = events(object_type="task")
    assert (event.action, event.tenant_id, event.object_id) == (
        "reply",
        world["a"].pk,
        str(task.pk),
    )
    assert event.changes == {"message_id": [None, "m-1"]}
    assert (event.actor, event.source) == ("user:owner_a", ADDRESS)
    assert "the words themselves" not in row_text(event)


def test_a_redelivery_from_the_console_is_recorded_for_the_tenant(client, world):
    task = task_create(world["agent_a"])
    event = task.events.order_by("-seq").first()
    config = PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/hook")
    dead = Delivery.objects.create(
        config=config, event=event, seq=event.seq, state=Delivery.State.DEAD, attempts=3,
        next_attempt_at=timezone.now(),
    )  # fmt: skip
    owner_client(client, world)
    response = client.post(reverse("console:delivery-redeliver", args=[dead.pk]))
    assert response.status_code == 302
    [redelivered] = events(object_type="delivery")
    assert (redelivered.action, redelivered.tenant_id) == ("redeliver", world["a"].pk)
    assert (redelivered.actor, redelivered.source) == ("user:owner_a", ADDRESS)
    assert redelivered.changes == {"state": ["dead", "pending"]}
    # a delivery that is not dead is left alone, and nothing is recorded
    client.post(reverse("console:delivery-redeliver", args=[dead.pk]))
    assert len(events(object_type="delivery")) == 1


def test_a_job_revoked_by_an_operator_is_the_platforms_record(client, world):
    client.force_login(world["operator"])
    job_id = str(uuid.uuid4())
    response = client.post(reverse("console:job-revoke"), {"job": job_id}, follow=True)
    assert any("revoked" in str(m) for m in response.context["messages"])
    [revoked] = events(object_type="job")
    assert (revoked.action, revoked.object_id, revoked.tenant_id) == ("revoke", job_id, None)
    assert revoked.actor == "user:operator"


# --- the admin --------------------------------------------------------------------------------


@pytest.fixture
def operator(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    client.defaults["REMOTE_ADDR"] = "198.51.100.4"
    return client


def test_admin_changes_are_recorded_as_the_operator(operator, make_tenant):
    from ..agents.test_admin_agents import agent_form

    tenant = make_tenant()
    response = operator.post(
        "/admin/agents/agent/add/",
        agent_form(tenant, executor_kind="echo", executor_config="{}", slug="echo"),
    )
    assert response.status_code == 302, response.content[:2000]
    agent = Agent.objects.get(tenant=tenant, slug="echo")
    url = f"/admin/agents/agent/{agent.pk}/change/"
    response = operator.post(
        url,
        agent_form(tenant, executor_kind="echo", executor_config="{}", slug="echo", name="Renamed"),
    )
    assert response.status_code == 302, response.content[:2000]

    created, renamed = events(object_type="agent", object_id=str(agent.pk))
    for event in (created, renamed):
        assert (event.actor, event.source, event.tenant_id) == (
            "user:root",
            "198.51.100.4",
            tenant.pk,
        )
    assert created.action == "create" and renamed.action == "update"
    assert renamed.changes == {"name": ["Shouter", "Renamed"]}


def test_an_accounts_groups_are_recorded_by_name(django_user_model):
    group = Group.objects.create(name="ops")
    person = django_user_model.objects.create_user("gus")
    with acting_as(Actor("user:root")):
        person.groups.add(group)
        person.groups.remove(group)
    added, removed = events(object_type="user", object_label="gus", action="update")
    assert added.changes == {"groups": [[], ["ops"]]}
    assert removed.changes == {"groups": [["ops"], []]}


def test_an_admin_key_is_recorded_and_its_shown_secret_is_not(operator, make_tenant):
    tenant = make_tenant()
    response = operator.post(
        "/admin/agents/apikey/add/",
        {"tenant": tenant.pk, "name": "ops", "principal": "", "scopes": "[]", "agent": ""},
        follow=True,
    )
    secret = re.search(r"not shown again: (\S+)", response.content.decode())[1]
    [created] = events(object_type="api_key")
    assert (created.actor, created.action, created.tenant_id) == ("user:root", "create", tenant.pk)
    assert secret not in log_text()


def test_an_operator_granting_staff_and_a_password_in_the_admin(operator, django_user_model):
    person = django_user_model.objects.create_user("pat", password="first-password-1")
    url = f"/admin/auth/user/{person.pk}/password/"
    response = operator.post(
        url, {"password1": "Second-pass-2984", "password2": "Second-pass-2984"}
    )
    assert response.status_code == 302, response.content[:2000]
    person.refresh_from_db()
    person.is_staff = True
    with acting_as(Actor("user:root")):
        person.save()
    changed, staff = events(object_type="user", object_label="pat", action="update")
    assert changed.changes == {"password": [MASK, CHANGED]}
    assert (changed.actor, changed.source) == ("user:root", "198.51.100.4")
    assert staff.changes == {"is_staff": [False, True]}
    assert "Second-pass-2984" not in log_text() and person.password not in log_text()


def test_a_push_config_deleted_in_the_admin_is_recorded_for_its_tenant(operator, world):
    task = task_create(world["agent_a"])
    config = PushConfig.objects.create(task=task, config_id="c1", url="https://example.com/hook")
    response = operator.post(f"/admin/push_app/pushconfig/{config.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    [deleted] = events(object_type="push_config")
    assert (deleted.action, deleted.tenant_id, deleted.actor) == (
        "delete",
        world["a"].pk,
        "user:root",
    )


def test_signing_keys_rotated_and_retired_mask_the_private_key(world):
    tenant = world["a"]
    with acting_as(Actor("user:root")):
        first = signing_key_rotate(tenant=tenant)
        signing_key_rotate(tenant=tenant)
        signing_key_retire(signing_key=first)
    made, rotated, retired = events(object_type="signing_key")
    assert (made.action, rotated.action, retired.action) == ("create", "rotate", "retire")
    assert made.changes["private_key_encrypted"] == [None, MASK]
    assert made.changes["public_jwk"][1]["kid"] == first.kid
    private = decrypt(SigningKey.objects.get(pk=first.pk).private_key_encrypted)
    body = private.split("-----")[2].strip().splitlines()[0]
    text = log_text()
    assert body not in text and first.private_key_encrypted not in text


# --- management commands and the platform itself -----------------------------------------------


def test_a_command_acts_as_itself_from_manage_py(make_tenant, capsys):
    tenant = make_tenant()
    call_command("create_api_key", tenant.slug, "deploy-bot", "--admin")
    secret = capsys.readouterr().out.split("api key: ")[1].split()[0]
    [created] = events(object_type="api_key")
    assert (created.actor, created.actor_user, created.source) == (
        "command:create_api_key",
        None,
        "manage.py",
    )
    assert created.changes["scopes"] == [None, ["tenant-admin"]]
    assert secret not in log_text()


def test_what_no_person_or_command_does_is_the_platforms(make_tenant):
    tenant = make_tenant()
    [created] = events(object_type="tenant", object_id=str(tenant.pk))
    assert (created.actor, created.source, created.actor_user) == ("system", "", None)


def test_a_save_that_changes_nothing_recorded_writes_nothing(world):
    agent = world["agent_a"]
    before = changes().count()
    agent.save()  # only updated_at moves
    ApiKey.objects.filter(tenant=world["a"]).update(name="bulk")  # not heard, by design
    assert changes().count() == before


def test_deleting_an_agent_records_it_and_its_keys(client, world, make_agent):
    agent = make_agent(world["a"], "doomed", is_active=False)
    key = ApiKey.objects.create(
        tenant=world["a"], name="own", prefix="own1", secret_hash="f" * 64, agent=agent
    )
    Agent.objects.filter(pk=agent.pk).update(updated_at=agent.created_at.replace(year=2000))
    owner_client(client, world)
    response = client.post(agent_url(agent, "console:agent-delete"), {"confirm_slug": "doomed"})
    assert response.status_code == 302
    [gone_key] = events(object_type="api_key", action="delete")
    [gone_agent] = events(object_type="agent", action="delete")
    assert gone_key.object_id == str(key.pk) and gone_key.changes["secret_hash"] == [MASK, None]
    assert gone_agent.changes["slug"] == ["doomed", None]
    assert gone_agent.actor == "user:owner_a" and gone_agent.tenant_id == world["a"].pk
    assert "f" * 64 not in log_text()


# --- the hot paths record nothing --------------------------------------------------------------


@pytest.mark.django_db(transaction=True)  # the request reads on the database threads
def test_an_a2a_send_writes_no_audit_event(make_tenant, make_agent, make_key):
    tenant = make_tenant()
    agent = make_agent(tenant)
    secret = make_key(tenant, "caller")
    before = changes().count()
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
            "configuration": {"returnImmediately": True},
        },
    }

    async def send() -> dict[str, Any]:
        response = await AsyncClient().post(
            f"/a2a/{tenant.slug}/{agent.slug}/",
            json.dumps(body),
            content_type="application/json",
            headers={"X-API-Key": secret, "A2A-Version": "1.0"},
        )
        assert response.status_code == 200
        return response.json()

    from asgiref.sync import async_to_sync

    answer = async_to_sync(send)()
    assert "task" in answer["result"], answer
    assert ApiKey.objects.get(tenant=tenant).last_used_at is not None  # the key was used
    assert changes().count() == before
